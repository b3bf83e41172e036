// Arithmetic for the model without eval or Function: a recursive-descent parser over
//   expression = term (("+" | "-") term)*
//   term       = power (("*" | "/" | "%") power)*
//   power      = unary ("^" power)?            (right-associative: 2^3^2 = 2^9)
//   unary      = ("+" | "-") unary | primary
//   primary    = number | constant | name "(" expression ("," expression)* ")" | "(" expression ")"
// It evaluates as it parses; anything else is a SyntaxError naming the position.

// Maps, not object literals: a lookup of "constructor" or "__proto__" must find nothing.
const FUNCTIONS = new Map<string, (...args: number[]) => number>([
  ["sqrt", Math.sqrt],
  ["abs", Math.abs],
  ["round", Math.round],
  ["floor", Math.floor],
  ["ceil", Math.ceil],
  ["ln", Math.log],
  ["log10", Math.log10],
  ["min", Math.min],
  ["max", Math.max],
]);
const CONSTANTS = new Map([
  ["pi", Math.PI],
  ["e", Math.E],
]);
/** Bounds that keep a hostile expression cheap. */
const MAX_LENGTH = 500;
const MAX_DEPTH = 50;

export function calculate(expression: string): number {
  if (expression.length > MAX_LENGTH) throw new RangeError(`expression longer than ${MAX_LENGTH} characters`);
  const parser = new Parser(expression);
  const value = parser.parse();
  if (!Number.isFinite(value)) throw new RangeError("the result is not a finite number (division by zero?)");
  return value;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(private readonly source: string) {}

  parse(): number {
    const value = this.expression();
    this.skipSpaces();
    if (this.index < this.source.length) this.fail(`unexpected "${this.source[this.index]}"`);
    return value;
  }

  private expression(): number {
    if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
    let value = this.term();
    for (let op = this.operator("+-"); op; op = this.operator("+-")) value = op === "+" ? value + this.term() : value - this.term();
    this.depth--;
    return value;
  }

  private term(): number {
    let value = this.power();
    for (let op = this.operator("*/%"); op; op = this.operator("*/%")) {
      const right = this.power();
      value = op === "*" ? value * right : op === "/" ? value / right : value % right;
    }
    return value;
  }

  private power(): number {
    const base = this.unary();
    return this.operator("^") ? base ** this.power() : base;
  }

  private unary(): number {
    const sign = this.operator("+-");
    if (sign) {
      if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
      const value = this.unary();
      this.depth--;
      return sign === "-" ? -value : value;
    }
    return this.primary();
  }

  private primary(): number {
    this.skipSpaces();
    if (this.operator("(")) {
      const value = this.expression();
      this.expect(")");
      return value;
    }
    const number = /^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(this.rest());
    if (number) {
      this.index += number[0].length;
      return Number(number[0]);
    }
    const name = /^[a-zA-Z_]\w*/.exec(this.rest())?.[0];
    if (name === undefined) this.fail(this.index < this.source.length ? `unexpected "${this.source[this.index]}"` : "unexpected end");
    this.index += name.length;
    const constant = CONSTANTS.get(name.toLowerCase());
    if (constant !== undefined) return constant;
    const fn = FUNCTIONS.get(name.toLowerCase());
    if (fn === undefined) this.fail(`unknown name "${name}" (functions: ${[...FUNCTIONS.keys()].join(", ")}; constants: pi, e)`);
    this.expect("(");
    const args = [this.expression()];
    while (this.operator(",")) args.push(this.expression());
    this.expect(")");
    return fn(...args);
  }

  /** Consumes one of the characters in `chars` after spaces, returning it, or returns undefined. */
  private operator(chars: string): string | undefined {
    this.skipSpaces();
    const char = this.source[this.index];
    if (char === undefined || !chars.includes(char)) return undefined;
    this.index++;
    return char;
  }

  private expect(char: string): void {
    if (!this.operator(char)) this.fail(`expected "${char}"`);
  }

  private skipSpaces(): void {
    while (this.source[this.index] === " " || this.source[this.index] === "\t") this.index++;
  }

  private rest(): string {
    return this.source.slice(this.index);
  }

  private fail(message: string): never {
    throw new SyntaxError(`${message} at position ${this.index + 1}`);
  }
}
