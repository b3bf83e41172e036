import { Environment, Interpreter } from "@huggingface/jinja";

/**
 * @huggingface/jinja's interpreter where it renders otherwise than Python's jinja2 (as transformers
 * runs it) on real chat templates, each difference found by test/unit/chatTemplateReferences.test.ts
 * and fixed here by overriding the library's one public extension point, `evaluate`, for the nodes
 * concerned; every other node, and these in every other case, are the library's own. (A patch to the
 * library would do the same inside node_modules; this keeps the differences beside their tests.)
 *
 * - `select`, `reject`, `selectattr`, `rejectattr` on none or undefined give nothing, as jinja2's do
 *   (`if seq:`); the library throws (Functionary v3.1 without tools: `none | selectattr(…)`).
 * - `trim` of undefined is "", as jinja2's str(Undefined) (Hermes 2 Pro's parameter without a description).
 * - `min` and `max` of a list (MiniCPM5: `[a, b] | min`); the library has neither.
 * - `string` of a dict or list is its Python repr (Apriel: `tool|string`); the library writes JSON or throws.
 * - `str.format` with `{}`, `{0}` and `{name}` fields (Hy3: `'<think{}>'.format(HYTK)`); the library has none.
 * - `+` of a str and anything but a str throws, as in Python (Functionary v3.2's `"…" + arguments` on
 *   a dict); the library joins them.
 * - `safe` marks a string as markupsafe's Markup, and `+` with a Markup escapes the other string, as
 *   Python's Markup.__add__/__radd__ do (Functionary v3.1: `"…"|safe + t | tojson` prints `&#34;`).
 * - A dict literal with integer keys (Seed-OSS: `{0: 0, 512: 128, …}`), read by `d[512]` and iterated
 *   by `dictsort`, `items` and `keys` with its keys as integers; the library takes string keys only.
 * - `for a, b in` a list of tuples (Functionary v3.2); the library unpacks lists only.
 * - Variables the caller provides for templates that read them and do not define them (`provided`:
 *   FireFunction's `functions` and `datetime`, which llama.cpp's server passes it).
 */
export class Jinja2Interpreter extends Interpreter {
  readonly #provided: Readonly<Record<string, () => unknown>>;
  /** Whether this render has made a dict with integer keys: until then `d[k]` is the library's own. */
  #keyedDicts = false;

  /** `provided`: each variable's value, made when the template first reads it. */
  constructor(env: Environment, provided: Readonly<Record<string, () => unknown>> = {}) {
    super(env);
    this.#provided = provided;
  }

  /** The template's text for a parsed template (the library's run, which its unresolved declarations leave untyped). */
  render(program: unknown): string {
    return (super.run(program) as Value).value as string;
  }

  // The library's declarations resolve to any here (see Value), so TypeScript sees no member to override.
  evaluate(statement: Statement | undefined, environment: Environment): Value {
    const node = statement as AnyNode | undefined;
    switch (node?.type) {
      case "Identifier":
        return this.#identifier(node as IdentifierNode, environment);
      case "FilterExpression":
        return this.#filter(node as FilterNode, environment);
      case "BinaryExpression":
        return this.#binary(node as BinaryNode, environment);
      case "CallExpression":
        return this.#call(node as CallNode, environment);
      case "ObjectLiteral":
        return this.#objectLiteral(node as ObjectLiteralNode, environment);
      case "MemberExpression":
        return this.#member(node as MemberNode, environment);
      case "For":
        return this.#for(node as ForNode, environment);
      default:
        return super.evaluate(statement, environment);
    }
  }

  /**
   * The library's evaluation of `node`, a copy of the template's node whose sub-expressions already
   * evaluated (each once, in jinja2's order) are `slot`s: their values are bound in a child scope.
   */
  #evaluateWith(node: object, environment: Environment, values: Record<string, Value>): Value {
    const scope = new Environment(environment);
    for (const [name, value] of Object.entries(values)) scope.setVariable(slot(name).value, value);
    return super.evaluate(node as Statement, scope);
  }

  #identifier(node: IdentifierNode, environment: Environment): Value {
    const value = super.evaluate(node as unknown as Statement, environment);
    const provide = Object.hasOwn(this.#provided, node.value) ? this.#provided[node.value] : undefined;
    return value.type === "UndefinedValue" && provide !== undefined ? toValue(provide()) : value;
  }

  #filter(node: FilterNode, environment: Environment): Value {
    const operand = this.evaluate(node.operand, environment);
    const filter = node.filter;
    const name = filter.type === "Identifier" ? (filter as IdentifierNode).value : ((filter as CallNode).callee as IdentifierNode).value;
    const missing = operand.type === "NullValue" || operand.type === "UndefinedValue";
    if (missing && ["select", "reject", "selectattr", "rejectattr"].includes(name)) return new ArrayValue([]);
    if (name === "trim" && operand.type === "UndefinedValue") return new StringValue("");
    if ((name === "min" || name === "max") && node.filter.type === "Identifier" && isArray(operand)) return extreme(operand, name);
    if (name === "string" && node.filter.type === "Identifier" && (isArray(operand) || operand.type === "ObjectValue")) {
      return new StringValue(pythonStr(operand));
    }
    if (name === "safe" && operand.type === "StringValue") return markup(text(operand));
    // The library's own step after evaluating the operand (declared private, so reached by a cast),
    // rather than a slot's scope (a new Environment) for every filter of every render.
    return (this as unknown as LibraryInternals).applyFilter(operand, node.filter, environment);
  }

  #binary(node: BinaryNode, environment: Environment): Value {
    if (node.operator.value !== "+") return super.evaluate(node as unknown as Statement, environment);
    const left = this.evaluate(node.left, environment);
    const right = this.evaluate(node.right, environment);
    const strings = [left, right].filter((value) => value.type === "StringValue").length;
    if (strings === 2 && (markups.has(left) || markups.has(right))) return markup(escapedUnlessMarkup(left) + escapedUnlessMarkup(right));
    // The common case, joined here as the library joins it: with a slot's scope for every `+`, a
    // 21-message Llama 3.1 render took 0.55 ms against the library's 0.37 ms (now 0.40 ms).
    if (strings === 2) return new StringValue(text(left) + text(right));
    // Python adds a str only to a str (the library joins anything to one: a dict as its JSON).
    if (strings === 1) throw new TypeError(`unsupported operand types for +: ${left.type} and ${right.type}`);
    return this.#evaluateWith({ ...node, left: slot("left"), right: slot("right") }, environment, { left, right });
  }

  #call(node: CallNode, environment: Environment): Value {
    const callee = node.callee as AnyNode;
    if (callee.type !== "MemberExpression" || (callee as MemberNode).computed)
      return super.evaluate(node as unknown as Statement, environment);
    const member = callee as MemberNode;
    if ((member.property as IdentifierNode).value !== "format") return super.evaluate(node as unknown as Statement, environment);
    const object = this.evaluate(member.object, environment);
    if (object.type !== "StringValue") {
      const method = this.#evaluateWith({ ...member, object: slot("object") }, environment, { object });
      return this.#evaluateWith({ ...node, callee: slot("callee") }, environment, { callee: method });
    }
    const positional: Value[] = [];
    const named = new Map<string, Value>();
    for (const argument of node.args) {
      const each = argument as AnyNode;
      if (each.type === "KeywordArgumentExpression") {
        const keyword = each as unknown as { key: IdentifierNode; value: Statement };
        named.set(keyword.key.value, this.evaluate(keyword.value, environment));
      } else {
        positional.push(this.evaluate(argument, environment));
      }
    }
    return new StringValue(pythonFormat(text(object), positional, named));
  }

  #objectLiteral(node: ObjectLiteralNode, environment: Environment): Value {
    const entries = new Map<string, Value>();
    const keys = new Map<string, Value>();
    for (const [keyNode, valueNode] of node.value) {
      const key = this.evaluate(keyNode, environment);
      if (key.type !== "StringValue" && key.type !== "IntegerValue") {
        throw new Error(`Object keys must be strings or integers: got ${key.type}`);
      }
      // An integer key is kept under its JSON name, as json.dumps writes it (`{"512": 128}`).
      const name = String(key.value);
      entries.set(name, this.evaluate(valueNode, environment));
      keys.set(name, key);
    }
    const integerKeys = [...keys.values()].some((key) => key.type === "IntegerValue");
    if (!integerKeys) return new ObjectValue(entries);
    this.#keyedDicts = true;
    return new KeyedDict(entries, keys);
  }

  #member(node: MemberNode, environment: Environment): Value {
    if (!node.computed || !this.#keyedDicts) return super.evaluate(node as unknown as Statement, environment);
    const object = this.evaluate(node.object, environment);
    if (!(object instanceof KeyedDict)) return this.#evaluateWith({ ...node, object: slot("object") }, environment, { object });
    const key = this.evaluate(node.property, environment);
    return object.get(key) ?? new UndefinedValue();
  }

  #for(node: ForNode, environment: Environment): Value {
    if (node.loopvar.type !== "TupleLiteral") return super.evaluate(node as unknown as Statement, environment);
    const select = node.iterable.type === "SelectExpression" ? (node.iterable as SelectNode) : undefined;
    const iterable = this.evaluate(select ? select.lhs : node.iterable, environment);
    // Tuples unpack as lists do (the library's loop takes lists only).
    const items = isArray(iterable)
      ? new ArrayValue(list(iterable).map((item) => (item.type === "TupleValue" ? new ArrayValue(list(item)) : item)))
      : iterable;
    const iterableSlot = select ? { ...select, lhs: slot("iterable") } : slot("iterable");
    return this.#evaluateWith({ ...node, iterable: iterableSlot }, environment, { iterable: items });
  }
}

/**
 * The library's runtime values and AST nodes, as far as they are read here: its declarations import
 * their modules without extensions, which NodeNext resolution cannot follow, so its own types are any.
 */
interface Value {
  type: string;
  value: unknown;
  builtins: ReadonlyMap<string, Value>;
  toString(): string;
}
type Statement = AnyNode;

/** Library steps this class calls directly, which its declarations mark private. */
interface LibraryInternals {
  applyFilter(operand: Value, filter: Statement, environment: Environment): Value;
}

/** A variable no template can name (its names are Python identifiers), for a value evaluated beforehand. */
function slot(name: string): IdentifierNode {
  return { type: "Identifier", value: `\u0000${name}` };
}

interface AnyNode {
  type: string;
}
interface IdentifierNode extends AnyNode {
  value: string;
}
interface CallNode extends AnyNode {
  callee: Statement;
  args: Statement[];
}
interface FilterNode extends AnyNode {
  operand: Statement;
  filter: IdentifierNode | CallNode;
}
interface BinaryNode extends AnyNode {
  operator: { value: string };
  left: Statement;
  right: Statement;
}
interface ObjectLiteralNode extends AnyNode {
  value: Map<Statement, Statement>;
}
interface MemberNode extends AnyNode {
  object: Statement;
  property: Statement;
  computed: boolean;
}
interface ForNode extends AnyNode {
  loopvar: AnyNode;
  iterable: Statement;
}
interface SelectNode extends AnyNode {
  lhs: Statement;
}

// The library's runtime value classes, as its own conversion of JavaScript values makes them (it does not export them).
const scratch = new Environment();
type ValueClass<T> = new (value: T) => Value;
const StringValue = scratch.set("string", "").constructor as ValueClass<string>;
const ArrayValue = scratch.set("array", []).constructor as ValueClass<Value[]>;
interface ObjectValueType extends Value {
  items(): Value;
  keys(): Value;
}
const ObjectValue = scratch.set("object", {}).constructor as new (value: Map<string, Value>) => ObjectValueType;
const FunctionValue = scratch.set("function", () => null).constructor as ValueClass<(args: Value[]) => Value>;
const UndefinedValue = scratch.set("undefined", undefined).constructor as new () => Value;

/** A JavaScript value as the library's runtime value (a fresh scope each time: a scope declares a name once). */
function toValue(value: unknown): Value {
  return new Environment().set("value", value) as Value;
}

function text(value: Value): string {
  return value.value as string;
}

function list(value: Value): Value[] {
  return value.value as Value[];
}

function isArray(value: Value): boolean {
  return value.type === "ArrayValue" || value.type === "TupleValue";
}

/** Strings that `safe` made Markup (markupsafe's), and what `+` made of them. */
const markups = new WeakSet<Value>();

function markup(content: string): Value {
  const value = new StringValue(content);
  markups.add(value);
  return value;
}

/** markupsafe's escape: & < > " ' as its entities. */
function escapedUnlessMarkup(value: Value): string {
  if (markups.has(value)) return text(value);
  const entities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };
  return text(value).replace(/[&<>"']/g, (char) => entities[char]!);
}

/**
 * A dict with integer keys. Entries are kept under each key's JSON name (what tojson writes) with the
 * key itself beside: items, keys and dictsort give the keys as they were written.
 */
class KeyedDict extends ObjectValue {
  readonly #keys: ReadonlyMap<string, Value>;

  constructor(entries: Map<string, Value>, keys: ReadonlyMap<string, Value>) {
    super(entries);
    this.#keys = keys;
  }

  get(key: Value): Value | undefined {
    const name = String(key.value);
    return this.#keys.get(name)?.type === key.type ? this.#entries().get(name) : undefined;
  }

  #entries(): Map<string, Value> {
    return this.value as Map<string, Value>;
  }

  #pairs(): Value[][] {
    return [...this.#entries()].map(([name, value]) => [this.#keys.get(name)!, value]);
  }

  override items(): Value {
    return new ArrayValue(this.#pairs().map((pair) => new ArrayValue(pair)));
  }

  override keys(): Value {
    return new ArrayValue([...this.#keys.values()]);
  }

  override get builtins(): Map<string, Value> {
    return new Map([
      ...super.builtins,
      ["items", new FunctionValue(() => this.items())],
      ["keys", new FunctionValue(() => this.keys())],
      // jinja2's dictsort by key, its default, as the filter is used (`d | dictsort`): Python orders integers by value.
      [
        "dictsort",
        new FunctionValue(
          () =>
            new ArrayValue(
              this.#pairs()
                .sort(([a], [b]) => pythonOrder(a!, b!))
                .map((pair) => new ArrayValue(pair)),
            ),
        ),
      ],
    ]);
  }
}

/** Python's `<` on two keys or list items: numbers by value, strings case-insensitively (jinja2's default for min, max, dictsort). */
function pythonOrder(a: Value, b: Value): number {
  const numeric = (value: Value) => value.type === "IntegerValue" || value.type === "FloatValue";
  if (numeric(a) && numeric(b)) return (a.value as number) - (b.value as number);
  if (a.type === "StringValue" && b.type === "StringValue") {
    const [x, y] = [text(a).toLowerCase(), text(b).toLowerCase()];
    return x < y ? -1 : x > y ? 1 : 0;
  }
  throw new Error(`'<' not supported between ${a.type} and ${b.type}`);
}

/** jinja2's min and max filters: the first smallest (largest) item, undefined for an empty list. */
function extreme(values: Value, which: "min" | "max"): Value {
  const sign = which === "min" ? 1 : -1;
  return (
    list(values).reduce<Value | undefined>(
      (best, item) => (best === undefined || sign * pythonOrder(item, best) < 0 ? item : best),
      undefined,
    ) ?? new UndefinedValue()
  );
}

/** Python's str(): a string as it is, anything else as its repr. */
function pythonStr(value: Value): string {
  return value.type === "StringValue" ? text(value) : pythonRepr(value);
}

/** Python's repr() of the values a template holds. */
function pythonRepr(value: Value): string {
  switch (value.type) {
    case "StringValue":
      return stringRepr(text(value));
    case "BooleanValue":
      return value.value ? "True" : "False";
    case "NullValue":
      return "None";
    case "UndefinedValue":
      return "";
    case "ArrayValue":
      return `[${list(value).map(pythonRepr).join(", ")}]`;
    case "TupleValue": {
      const items = list(value).map(pythonRepr);
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
    }
    case "ObjectValue": {
      const keys = value instanceof KeyedDict ? list(value.keys()) : undefined;
      const entries = [...(value.value as Map<string, Value>)].map(
        ([name, item], index) => `${keys ? pythonRepr(keys[index]!) : stringRepr(name)}: ${pythonRepr(item)}`,
      );
      return `{${entries.join(", ")}}`;
    }
    default:
      // Numbers: the library's own text of them is Python's (21, 21.0).
      return value.toString();
  }
}

/** repr() of a str: single quotes unless it holds one and no double quote; backslashes and control characters escaped. */
function stringRepr(content: string): string {
  const quote = content.includes("'") && !content.includes('"') ? '"' : "'";
  const named: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  const escaped = content.replace(/[\\\p{Cc}]/gu, (char) => named[char] ?? `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return quote + escaped.replaceAll(quote, `\\${quote}`) + quote;
}

/** str.format with `{}`, `{0}` and `{name}` fields and `{{`/`}}` escapes; a field with a format spec or conversion is refused. */
function pythonFormat(template: string, positional: Value[], named: ReadonlyMap<string, Value>): string {
  let next = 0;
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, field: string | undefined) => {
    if (field === undefined) return match[0]!;
    if (/[!:]/.test(field)) throw new Error(`str.format: format specs are not supported: {${field}}`);
    const value = field === "" ? positional[next++] : /^\d+$/.test(field) ? positional[Number(field)] : named.get(field);
    if (value === undefined) throw new Error(`str.format: no argument for {${field}}`);
    return pythonStr(value);
  });
}
