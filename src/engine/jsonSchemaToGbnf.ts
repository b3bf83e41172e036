// JSON Schema → llama.cpp GBNF (grammars/README.md of the bundled llama.cpp), so that sampling
// can only produce JSON valid against the schema.
//
// The JSON has one fixed layout, with no free whitespace: `{"a": 1, "b": [true, null]}`, `{}`,
// `[]`. A model, above all a test model with random weights, must not be able to fill its output
// with spaces or newlines, and fewer choices make sampling faster.
//
// Which schemas are supported is decided in src/core/jsonSchemaSupport.ts; the helpers shared
// with it (allowedTypes, objectProperties, ...) make both read a schema the same way.
import {
  allowedLiterals,
  allowedTypes,
  alternativesOf,
  findUnsupportedSchemaFeature,
  hasNumericBounds,
  INTEGER_LIMIT,
  integerRange,
  isSchemaObject,
  objectProperties,
  resolveLocalRef,
  stringAutomatonOf,
  usesStringAutomaton,
  type JsonType,
  type SchemaObject,
  type SupportedFormat,
} from "../core/jsonSchemaSupport.js";
import { intersect, type CharSet, type StringAutomaton } from "../core/stringPattern.js";

/** GBNF rule definitions (`name ::= …`, one per line) and the rule matching one value. */
export interface GbnfRules {
  rules: string[];
  root: string;
}

export interface JsonSchemaToGbnfOptions {
  /**
   * Starts every rule name, so the rules of several schemas can share one grammar (one prefix
   * per schema, none a prefix of another, e.g. "tool0-", "tool1-"). Letters, digits and "-",
   * the characters of GBNF rule names.
   */
  prefix: string;
}

/**
 * Rules matching exactly the JSON texts, in the fixed layout, of (a subset of) the schema's
 * values. Throws when findUnsupportedSchemaFeature reports a feature of the schema.
 */
export function jsonSchemaToGbnf(schema: object | boolean, options: JsonSchemaToGbnfOptions): GbnfRules {
  const unsupported = findUnsupportedSchemaFeature(schema);
  if (unsupported) {
    throw new Error(`Unsupported JSON Schema feature '${unsupported.keyword}' at '${unsupported.path}': ${unsupported.reason}`);
  }
  const grammar = new GrammarBuilder(options.prefix);
  const root = new SchemaConverter(grammar, schema).reference("#");
  return { rules: grammar.rules(), root };
}

/** Rules matching any JSON value, in the fixed layout. */
export function jsonValueGbnf(prefix: string): GbnfRules {
  return libraryRules(prefix, "value");
}

/** Rules matching any JSON object, in the fixed layout (response_format json_object). */
export function jsonObjectGbnf(prefix: string): GbnfRules {
  return libraryRules(prefix, "object");
}

/**
 * A GBNF string literal matching exactly `text`. Quotes, backslashes and control characters are
 * escaped with the escapes llama.cpp's parser knows (parse_char: \" \\ \n \r \t \xXX); other
 * characters are written as they are, since grammars are read as UTF-8.
 * Throws for NUL, which llama.cpp can never match (it reads generated text as NUL-terminated
 * strings), and for lone surrogates, which have no UTF-8 form.
 */
export function gbnfLiteral(text: string): string {
  let literal = '"';
  for (const character of text) literal += literalCharacter(character);
  return `${literal}"`;
}

function literalCharacter(character: string): string {
  const code = character.codePointAt(0) as number;
  if (code === 0) throw new Error("A GBNF literal cannot contain NUL: llama.cpp never matches it");
  if (code >= 0xd800 && code <= 0xdfff) throw new Error("A GBNF literal cannot contain a lone surrogate");
  switch (character) {
    case '"':
      return '\\"';
    case "\\":
      return "\\\\";
    case "\n":
      return "\\n";
    case "\r":
      return "\\r";
    case "\t":
      return "\\t";
  }
  const control = code < 0x20 || (code >= 0x7f && code <= 0x9f);
  return control ? `\\x${code.toString(16).padStart(2, "0")}` : character;
}

/**
 * Rules every schema may use, by name without the prefix; `<name>` in a body refers to another
 * of them. A format rule matches the text between the quotes of a string.
 */
const LIBRARY = {
  value: String.raw`<object> | <array> | <string> | <number> | <boolean> | "null"`,
  object: String.raw`"{" ( <member> ( ", " <member> )* )? "}"`,
  member: String.raw`<string> ": " <value>`,
  array: String.raw`"[" ( <value> ( ", " <value> )* )? "]"`,
  string: String.raw`"\"" <char>* "\""`,
  // One character of a JSON string (RFC 8259 section 7): a Unicode scalar value other than a
  // quote, a backslash or a control character, or an escape. Listing the allowed ranges (rather
  // than negating) keeps out code points above U+10FFFF, which llama.cpp's UTF-8 decoder would
  // otherwise accept from byte tokens. Surrogates are left out, raw or escaped, so each element
  // is exactly one character and minLength / maxLength can be counted as repetitions.
  // What no rule can keep out: an overlong UTF-8 form whose bytes arrive in separate tokens
  // (E0 80..9F or F0 80..8F first), which llama.cpp's decoder reads as the code point it spells
  // and JavaScript as one U+FFFD per byte. Trained models do not write these.
  char: String.raw`[\x20-\x21\x23-\x5B\x5D-\x7F\u0080-\uD7FF\uE000-\U0010FFFF] | "\\" ( ["\\/bfnrt] | "u" <hex4> )`,
  hex4: String.raw`[0-9A-CEFa-cef] [0-9A-Fa-f]{3} | [Dd] [0-7] [0-9A-Fa-f]{2}`,
  boolean: String.raw`"true" | "false"`,
  // At most 15 digits, so every integer is exact in a double (below 2^53).
  integer: String.raw`"-"? ( "0" | [1-9] [0-9]{0,14} )`,
  // Bounded fraction and exponent: a number can neither run on nor overflow to Infinity.
  number: String.raw`<integer> ( "." [0-9]{1,15} )? ( "e" "-"? [1-9] [0-9]? )?`,
  // A number less than 10^15 in magnitude (no positive exponent), so within ±(2^53−1): for
  // numbers whose minimum / maximum are at or beyond that (src/core/jsonSchemaSupport.ts).
  "bounded-number": String.raw`<integer> ( "." [0-9]{1,15} )? ( "e-" [1-9] [0-9]? )?`,
  // RFC 3339 full-date, with the days of each month and February 29 in leap years only.
  date: String.raw`[0-9]{4} "-" <month-day> | <leap-year> "-02-29"`,
  "month-day": String.raw`<month-31> "-" ( <day> | "29" | "30" | "31" ) | <month-30> "-" ( <day> | "29" | "30" ) | "02-" <day>`,
  "month-31": String.raw`"0" [13578] | "1" [02]`,
  "month-30": String.raw`"0" [469] | "11"`,
  day: String.raw`"0" [1-9] | "1" [0-9] | "2" [0-8]`,
  // Divisible by 4 and not by 100 (the last two digits), or divisible by 400 (the first two digits, then "00").
  "leap-year": String.raw`[0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00"`,
  // RFC 3339 full-time: always with an offset, never a leap second.
  time: String.raw`<hour> ":" <minute> ":" <minute> ( "." [0-9]{1,9} )? ( "Z" | ( "+" | "-" ) <hour> ":" <minute> )`,
  hour: String.raw`[01] [0-9] | "2" [0-3]`,
  minute: String.raw`[0-5] [0-9]`,
  "date-time": String.raw`<date> "T" <time>`,
  uuid: String.raw`[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`,
  // RFC 5321 Mailbox with a Dot-string local part, kept within its length limits (local part
  // at most 64 octets, domain at most 255): one atom of up to 64 characters, or up to four of
  // up to 15 joined by dots; two or three labels.
  email: String.raw`<local-part> "@" <label> ( "." <label> ){1,2}`,
  "local-part": String.raw`<atext>{1,64} | <atext>{1,15} ( "." <atext>{1,15} ){1,3}`,
  atext: String.raw`[A-Za-z0-9!#$%&'*+/=?^_\x60{|}~\-]`,
  // RFC 1123 host name: labels of at most 63 letters, digits and inner hyphens; at most 191 characters.
  hostname: String.raw`<label> ( "." <label> ){0,2}`,
  label: String.raw`[a-z0-9] ( [a-z0-9\-]{0,61} [a-z0-9] )?`,
  ipv4: String.raw`<octet> "." <octet> "." <octet> "." <octet>`,
  octet: String.raw`"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]`,
} satisfies Record<string, string> & Record<SupportedFormat, string>;

type LibraryRule = keyof typeof LIBRARY;

/**
 * The largest repetition count written as one `{m,n}`. llama.cpp expands `x{m,n}` into about n
 * rules and refuses more than 2000 (MAX_REPETITION_THRESHOLD in src/llama-grammar.cpp), and
 * silently drops an upper bound above 2000; longer repetitions are written as chains.
 */
const REPETITION_CHUNK = 1000;

function libraryRules(prefix: string, rule: LibraryRule): GbnfRules {
  const grammar = new GrammarBuilder(prefix);
  const root = grammar.library(rule);
  return { rules: grammar.rules(), root };
}

/**
 * Collects named rules. Schema rules are named after where they come from ("root-address-city",
 * "def-Node-children"); they all start with "root" or "def-", so they never take the name of a
 * library rule.
 */
class GrammarBuilder {
  readonly #prefix: string;
  /** Rule bodies by full name; "" while the body is still being built. */
  readonly #rules = new Map<string, string>();

  constructor(prefix: string) {
    if (!/^[A-Za-z0-9-]+$/.test(prefix)) throw new Error(`Invalid GBNF rule name prefix: ${JSON.stringify(prefix)}`);
    this.#prefix = prefix;
  }

  /** Reserves a new rule name based on `hint`; define() gives its body. */
  reserve(hint: string): string {
    const base = this.#prefix + hint;
    let name = base;
    for (let suffix = 2; this.#rules.has(name); suffix++) name = `${base}-${suffix}`;
    this.#rules.set(name, "");
    return name;
  }

  define(name: string, body: string): string {
    this.#rules.set(name, body);
    return name;
  }

  rule(hint: string, body: string): string {
    return this.define(this.reserve(hint), body);
  }

  /** The name of a library rule, adding it (and the rules it uses) on first use. */
  library(rule: LibraryRule): string {
    const name = this.#prefix + rule;
    if (!this.#rules.has(name)) {
      this.#rules.set(name, "");
      this.define(
        name,
        LIBRARY[rule].replace(/<([a-z0-9-]+)>/g, (_, used: string) => this.library(used as LibraryRule)),
      );
    }
    return name;
  }

  rules(): string[] {
    return [...this.#rules].map(([name, body]) => `${name} ::= ${body}`);
  }
}

/**
 * Turns the schemas of one document into rules. Each schema becomes an expression; expressions
 * that are not a single rule name get a rule of their own, so alternatives never need brackets.
 */
class SchemaConverter {
  readonly #grammar: GrammarBuilder;
  readonly #root: object | boolean;
  /** Rule names of reference targets by key, so recursive schemas become recursive rules. */
  readonly #references = new Map<string, string>();

  constructor(grammar: GrammarBuilder, root: object | boolean) {
    this.#grammar = grammar;
    this.#root = root;
  }

  /** The rule of a local reference ("#" is the whole schema). */
  reference(ref: string): string {
    const target = resolveLocalRef(this.#root, ref);
    if (!target) throw new Error(`Unresolved $ref ${ref}`);
    const known = this.#references.get(target.key);
    if (known !== undefined) return known;
    const hint = target.name === undefined ? "root" : `def-${ruleWord(target.name)}`;
    const name = this.#grammar.reserve(hint);
    this.#references.set(target.key, name);
    return this.#grammar.define(name, this.#expression(target.schema, hint));
  }

  #rule(schema: unknown, hint: string): string {
    const expression = this.#expression(schema, hint);
    return /^[A-Za-z0-9-]+$/.test(expression) ? expression : this.#grammar.rule(hint, expression);
  }

  #expression(schema: unknown, hint: string): string {
    if (!isSchemaObject(schema)) return this.#grammar.library("value"); // `true`: findUnsupportedSchemaFeature refused `false`
    if (typeof schema.$ref === "string") return this.reference(schema.$ref);
    const alternatives = alternativesOf(schema);
    if (alternatives) return alternatives.map((alternative, index) => this.#rule(alternative, `${hint}-${index + 1}`)).join(" | ");
    const literals = allowedLiterals(schema);
    if (literals) return literals.map((value) => gbnfLiteral(JSON.stringify(value))).join(" | ");
    const types = allowedTypes(schema);
    if (!types) return this.#grammar.library("value");
    return types.map((type) => this.#typed(schema, type, types.length === 1 ? hint : `${hint}-${type}`)).join(" | ");
  }

  /** The values of `type` the schema allows. */
  #typed(schema: SchemaObject, type: JsonType, hint: string): string {
    switch (type) {
      case "object":
        return this.#object(schema, hint);
      case "array":
        return this.#array(schema, hint);
      case "string":
        return this.#string(schema, hint);
      case "null":
        return '"null"';
      case "integer":
        return hasNumericBounds(schema) ? this.#integer(schema, hint) : this.#grammar.library("integer");
      case "number":
        // Only bounds at or beyond ±(2^53−1) got here (jsonSchemaSupport refuses narrower ones).
        return this.#grammar.library(hasNumericBounds(schema) ? "bounded-number" : "number");
      default:
        return this.#grammar.library(type);
    }
  }

  #integer(schema: SchemaObject, hint: string): string {
    const { min, max } = integerRange(schema);
    if (min === -INTEGER_LIMIT && max === INTEGER_LIMIT) return this.#grammar.library("integer");
    return this.#grammar.rule(hint, integerRangeGbnf(min, max));
  }

  #string(schema: SchemaObject, hint: string): string {
    if (usesStringAutomaton(schema)) return `"\\"" ${this.#automaton(stringAutomatonOf(schema), hint)} "\\""`;
    const format = schema.format as SupportedFormat | undefined;
    if (format !== undefined) return `"\\"" ${this.#grammar.library(format)} "\\""`;
    const min = (schema.minLength as number | undefined) ?? 0;
    const max = schema.maxLength as number | undefined;
    if (min === 0 && max === undefined) return this.#grammar.library("string");
    return `"\\"" ${this.#repeat(this.#grammar.library("char"), min, max, hint)} "\\""`;
  }

  #array(schema: SchemaObject, hint: string): string {
    const min = (schema.minItems as number | undefined) ?? 0;
    const max = schema.maxItems as number | undefined;
    if (max === 0) return '"[]"';
    const item = this.#rule(schema.items ?? true, `${hint}-item`);
    const rest = this.#repeat(`( ", " ${item} )`, Math.max(min - 1, 0), max === undefined ? undefined : max - 1, hint);
    return min === 0 ? `"[" ( ${item} ${rest} )? "]"` : `"[" ${item} ${rest} "]"`;
  }

  /**
   * Properties in `properties` order, each written `"name": value`, separated by ", ". Optional
   * properties make the separators depend on which properties are present.
   */
  #object(schema: SchemaObject, hint: string): string {
    const properties = objectProperties(schema);
    if (!properties) return this.#grammar.library("object");
    if (properties.length === 0) return '"{}"';
    const members = properties.map(({ name, schema: property, required }) => ({
      required,
      text: `${gbnfLiteral(`${JSON.stringify(name)}: `)} ${this.#rule(property, `${hint}-${ruleWord(name)}`)}`,
    }));
    const first = members.findIndex((member) => member.required);
    const body =
      first === -1
        ? this.#optionalMembers(
            members.map((member) => member.text),
            hint,
          )
        : aroundRequired(members, first);
    return `"{" ${body} "}"`;
  }

  /**
   * None required: any subset, in order. `rest-i` matches what may follow once member i-1 is
   * written: member i (after ", ") or not, then rest-(i+1). One rule per member keeps the
   * grammar linear in the number of properties.
   */
  #optionalMembers(members: readonly string[], hint: string): string {
    let rest = "";
    const starts: string[] = [];
    for (let index = members.length - 1; index >= 0; index--) {
      starts.unshift(`${members[index]} ${rest}`);
      if (index > 0) rest = this.#grammar.rule(`${hint}-rest${index}`, `( ", " ${members[index]} )? ${rest}`);
    }
    return `( ${starts.join(" | ")} )?`;
  }

  /**
   * The characters of a string, JSON-escaped, along an automaton: one rule per state with moves,
   * a right-linear grammar ("first character, then the rule of the state reached").
   */
  #automaton(automaton: StringAutomaton, hint: string): string {
    const names = new Map<number, string>();
    const pending: number[] = [];
    const ruleOf = (state: number): string => {
      if ((automaton.states[state]?.moves.length ?? 0) === 0) return ""; // accepting, and nothing may follow
      let name = names.get(state);
      if (name === undefined) {
        name = this.#grammar.reserve(`${hint}-${names.size + 1}`);
        names.set(state, name);
        pending.push(state);
      }
      return name;
    };
    const start = ruleOf(0);
    for (let state = pending.pop(); state !== undefined; state = pending.pop()) {
      const { accepting, moves } = automaton.states[state] as StringAutomaton["states"][number];
      const body = moves.map(({ set, to }) => `${jsonCharacters(set)} ${ruleOf(to)}`.trim()).join(" | ");
      this.#grammar.define(names.get(state) as string, accepting ? `( ${body} )?` : body);
    }
    return start;
  }

  /**
   * `unit` repeated min to max times (no max: unbounded), in pieces llama.cpp accepts: exact
   * chunks, then the optional part as a chain of rules when it is longer than one chunk.
   */
  #repeat(unit: string, min: number, max: number | undefined, hint: string): string {
    const parts: string[] = [];
    let exact = min;
    for (; exact > REPETITION_CHUNK; exact -= REPETITION_CHUNK) parts.push(`${unit}{${REPETITION_CHUNK}}`);
    if (max === undefined) return [...parts, `${unit}{${exact},}`].join(" ");
    if (exact > 0) parts.push(`${unit}{${exact}}`);
    return [...parts, this.#upTo(unit, max - min, hint)].join(" ");
  }

  /** `unit` 0 to count times; past one chunk, "fewer than a chunk, or a chunk and then the rest". */
  #upTo(unit: string, count: number, hint: string): string {
    if (count === 0) return "";
    if (count <= REPETITION_CHUNK) return `${unit}{0,${count}}`;
    const rest = this.#upTo(unit, count - REPETITION_CHUNK, hint);
    return this.#grammar.rule(`${hint}-more`, `${unit}{0,${REPETITION_CHUNK - 1}} | ${unit}{${REPETITION_CHUNK}} ${rest}`);
  }
}

/**
 * At least one required: the optional members before the first required one each carry their
 * own ", " after them, the members after it one before them.
 */
function aroundRequired(members: readonly { required: boolean; text: string }[], first: number): string {
  return members
    .map(({ required, text }, index) => {
      if (index < first) return `( ${text} ", " )?`;
      if (index === first) return text;
      return required ? `", " ${text}` : `( ", " ${text} )?`;
    })
    .join(" ");
}

/**
 * The canonical decimal integers from min to max (no leading zeros, no "-0"), as llama.cpp's
 * json-schema-to-grammar writes them (_build_min_max_int): digit by digit, each alternative a
 * prefix followed by a digit range and free digits.
 */
function integerRangeGbnf(min: number, max: number): string {
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min > max) throw new Error(`Invalid integer range ${min}..${max}`);
  const alternatives: string[] = [];
  if (min < 0) alternatives.push(`"-" ${group(naturalRange(Math.max(1, -max), -min))}`);
  if (max >= 0) alternatives.push(...naturalRange(Math.max(0, min), max));
  return alternatives.join(" | ");
}

/** Alternatives matching the decimal forms of lo..hi, 0 <= lo <= hi. */
function naturalRange(lo: number, hi: number): string[] {
  const alternatives: string[] = [];
  if (lo === 0) {
    alternatives.push('"0"');
    if (hi === 0) return alternatives;
    lo = 1;
  }
  const loDigits = String(lo).length;
  const hiDigits = String(hi).length;
  if (loDigits === hiDigits) return [...alternatives, ...sameLength(String(lo), String(hi))];
  // Lengths whose every number is in the range are written together, as [1-9] and free digits.
  const loWhole = lo === 10 ** (loDigits - 1);
  const hiWhole = /^9+$/.test(String(hi));
  const shortest = loWhole ? loDigits : loDigits + 1;
  const longest = hiWhole ? hiDigits : hiDigits - 1;
  if (!loWhole) alternatives.push(...sameLength(String(lo), "9".repeat(loDigits)));
  if (shortest <= longest) alternatives.push(`[1-9] ${digits(shortest - 1, longest - 1)}`.trim());
  if (!hiWhole) alternatives.push(...sameLength(`1${"0".repeat(hiDigits - 1)}`, String(hi)));
  return alternatives;
}

/** Alternatives matching the digit strings from low to high, both of the same length. */
function sameLength(low: string, high: string): string[] {
  if (low === high) return [`"${low}"`];
  const rest = low.length - 1;
  const [first, last] = [Number(low[0]), Number(high[0])];
  if (first === last) return [`"${low[0]}" ${group(sameLength(low.slice(1), high.slice(1)))}`];
  const alternatives: string[] = [];
  let from = first;
  let to = last;
  if (rest > 0 && !/^0*$/.test(low.slice(1))) {
    alternatives.push(`"${first}" ${group(sameLength(low.slice(1), "9".repeat(rest)))}`);
    from++;
  }
  let upper: string | undefined;
  if (rest > 0 && !/^9*$/.test(high.slice(1))) {
    upper = `"${last}" ${group(sameLength("0".repeat(rest), high.slice(1)))}`;
    to--;
  }
  if (from <= to) alternatives.push(`${from === to ? `"${from}"` : `[${from}-${to}]`} ${digits(rest, rest)}`.trim());
  if (upper !== undefined) alternatives.push(upper);
  return alternatives;
}

/** min to max free digits. */
function digits(min: number, max: number): string {
  if (max === 0) return "";
  return min === max ? (min === 1 ? "[0-9]" : `[0-9]{${min}}`) : `[0-9]{${min},${max}}`;
}

function group(alternatives: readonly string[]): string {
  return alternatives.length === 1 ? (alternatives[0] as string) : `( ${alternatives.join(" | ")} )`;
}

/** Code points written raw in a JSON string: not a quote, backslash or control character. */
const RAW_JSON: CharSet = [
  [0x20, 0x21],
  [0x23, 0x5b],
  [0x5d, 0xd7ff],
  [0xe000, 0xffff],
];

/** Control characters with a two-character JSON escape. */
const SHORT_ESCAPES = new Map([
  [0x08, "\\b"],
  [0x09, "\\t"],
  [0x0a, "\\n"],
  [0x0c, "\\f"],
  [0x0d, "\\r"],
]);

/**
 * A GBNF expression matching the characters of `set` (code points of the Basic Multilingual
 * Plane, no surrogates) written as JSON.stringify writes them: raw where JSON allows, else `\"`,
 * `\\`, `\n` and the other short escapes, or `\u00XX` (lower-case hex digits).
 */
function jsonCharacters(set: CharSet): string {
  const alternatives: string[] = [];
  const raw = intersect(set, RAW_JSON);
  if (raw.length > 0)
    alternatives.push(
      `[${raw.map(([lo, hi]) => (lo === hi ? classCharacter(lo) : `${classCharacter(lo)}-${classCharacter(hi)}`)).join("")}]`,
    );
  if (intersect(set, [[0x22, 0x22]]).length > 0) alternatives.push(gbnfLiteral('\\"'));
  if (intersect(set, [[0x5c, 0x5c]]).length > 0) alternatives.push(gbnfLiteral("\\\\"));
  const controls = intersect(set, [[0, 0x1f]]).flatMap(([lo, hi]) => Array.from({ length: hi - lo + 1 }, (_, index) => lo + index));
  for (const code of controls) {
    const short = SHORT_ESCAPES.get(code);
    if (short !== undefined) alternatives.push(gbnfLiteral(short));
  }
  for (const high of [0, 1]) {
    const hex = controls.filter((code) => code >> 4 === high && !SHORT_ESCAPES.has(code)).map((code) => (code % 16).toString(16));
    if (hex.length > 0) alternatives.push(`${gbnfLiteral(`\\u00${high}`)} [${hex.join("")}]`);
  }
  return group(alternatives);
}

/** A code point inside a GBNF character class: letters and digits as they are, the rest escaped. */
function classCharacter(code: number): string {
  if (/[A-Za-z0-9]/.test(String.fromCharCode(code))) return String.fromCharCode(code);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** A property or definition name as part of a rule name. */
function ruleWord(name: string): string {
  return name.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "") || "x";
}
