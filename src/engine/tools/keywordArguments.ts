/**
 * Arguments written as keyword arguments rather than one JSON object: a Python call's, as LFM2
 * writes its calls (`[get_weather(city='Paris', days=3)]`), or Gemma 4's
 * (`<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>`): read back into the JSON
 * object they stand for, and the grammar that keeps a model's to its function's schema.
 */
import type { KeywordSyntax } from "../../chatTemplates/chatFormats.js";
import type { ToolDefinition } from "../../core/ChatRequest.js";
import { gbnfLiteral, jsonSchemaToGbnf } from "../jsonSchemaToGbnf.js";
import { isTextParameter, propertiesOf } from "./ToolCallSyntax.js";

/** Gemma 4's string delimiter: its strings are written between two of them, unescaped. */
export const GEMMA_QUOTE = '<|"|>';

/**
 * Reads `key=value, key=value` (or Gemma 4's `key:value,key:value`) as it arrives, a parameter at a
 * time, up to the `)` or `}` that closes the arguments (left for the caller, as the call's suffix):
 * each value a literal of the syntax's kind, given out as JSON.
 */
export class KeywordArguments {
  readonly #syntax: KeywordSyntax;
  #count = 0;

  constructor(syntax: KeywordSyntax) {
    this.#syntax = syntax;
  }

  /** Reads what it can of `text`: the JSON text of the parameters completed in it, how much of `text` it took, and whether the arguments ended. */
  read(text: string): { json: string; consumed: number; done: boolean } {
    const { assign, separator, end: close, literals } = this.#syntax;
    let json = "";
    let at = 0;
    for (;;) {
      const rest = text.slice(at);
      const next = rest.trimStart();
      const lead = rest.length - next.length;
      if (next.startsWith(close)) return { json: json + (this.#count === 0 ? "{}" : "}"), consumed: at + lead, done: true };
      // After a parameter, the separator comes before the next one.
      const start = this.#count === 0 ? lead : next.startsWith(separator.trim()) ? lead + separator.trim().length : -1;
      if (start === -1) return { json, consumed: at, done: false };
      const equals = rest.indexOf(assign, start);
      const end = equals === -1 ? undefined : literalEnd(rest, equals + assign.length, this.#syntax);
      if (end === undefined) return { json, consumed: at, done: false };
      const name = rest.slice(start, equals).trim();
      const literal = rest.slice(equals + assign.length, end).trim();
      json += `${this.#count++ === 0 ? "{" : ", "}${JSON.stringify(name)}: ${literals === "python" ? pythonToJson(literal) : gemmaToJson(literal)}`;
      at += end;
    }
  }
}

/**
 * Where the literal starting at `from` ends: before the first separator or closing character
 * outside strings and brackets, once such a character has arrived; undefined while the text may go on.
 */
function literalEnd(text: string, from: number, { separator, end, literals }: KeywordSyntax): number | undefined {
  const comma = separator.trim();
  let depth = 0;
  let quote: string | undefined;
  for (let i = from; i < text.length; i++) {
    const char = text[i]!;
    if (quote !== undefined) {
      if (literals === "python" && char === "\\") i++;
      else if (text.startsWith(quote, i)) {
        i += quote.length - 1;
        quote = undefined;
      }
    } else if (literals === "gemma" && text.startsWith(GEMMA_QUOTE, i)) {
      quote = GEMMA_QUOTE;
      i += GEMMA_QUOTE.length - 1;
    } else if (literals === "python" && (char === "'" || char === '"')) quote = char;
    else if (depth === 0 && (text.startsWith(comma, i) || text.startsWith(end, i))) return i;
    else if (char === "[" || char === "{" || char === "(") depth++;
    else if (char === "]" || char === "}" || char === ")") depth--;
  }
  return undefined;
}

/** A Python literal's JSON: strings in either quotes re-quoted, True, False and None as JSON's, the rest as written. */
export function pythonToJson(literal: string): string {
  let out = "";
  for (let i = 0; i < literal.length;) {
    const char = literal[i]!;
    if (char === "'" || char === '"') {
      let value = "";
      let j = i + 1;
      for (; j < literal.length && literal[j] !== char; j++) {
        if (literal[j] === "\\" && j + 1 < literal.length) {
          const next = literal[++j]!;
          value += ({ n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"' } as Record<string, string>)[next] ?? `\\${next}`;
        } else value += literal[j];
      }
      out += JSON.stringify(value);
      i = j + 1;
      continue;
    }
    const word = /^[A-Za-z_]\w*/.exec(literal.slice(i))?.[0];
    if (word !== undefined) {
      out += ({ True: "true", False: "false", None: "null" } as Record<string, string>)[word] ?? JSON.stringify(word);
      i += word.length;
      continue;
    }
    out += char === "(" ? "[" : char === ")" ? "]" : char;
    i++;
  }
  return out;
}

/**
 * A Gemma 4 literal's JSON, as llama.cpp's gemma4_to_json reads it (common/chat-peg-parser.cpp):
 * strings between `<|"|>` quoted, a dict's bare keys (`{unit:…}`, or keys between `<|"|>`)
 * quoted, numbers, true, false and null as they are.
 */
export function gemmaToJson(literal: string): string {
  let at = 0;
  const skip = () => {
    while (at < literal.length && /\s/.test(literal[at]!)) at++;
  };
  const string = (): string => {
    const end = literal.indexOf(GEMMA_QUOTE, at + GEMMA_QUOTE.length);
    const text = literal.slice(at + GEMMA_QUOTE.length, end === -1 ? undefined : end);
    at = end === -1 ? literal.length : end + GEMMA_QUOTE.length;
    return JSON.stringify(text);
  };
  /** Items up to `close`, separated by commas, each read by `item`. */
  const items = (close: string, item: () => string): string[] => {
    at++;
    const out: string[] = [];
    for (skip(); at < literal.length && literal[at] !== close; skip()) {
      const from = at;
      out.push(item());
      skip();
      if (literal[at] === ",") at++;
      // Text that is no value (the grammar writes none) is passed over rather than read forever.
      else if (at === from) at++;
    }
    at++;
    return out;
  };
  const value = (): string => {
    skip();
    if (literal.startsWith(GEMMA_QUOTE, at)) return string();
    if (literal[at] === "[") return `[${items("]", value).join(", ")}]`;
    if (literal[at] === "{") {
      const members = items("}", () => {
        let key: string;
        if (literal.startsWith(GEMMA_QUOTE, at)) key = string();
        else {
          const colon = literal.indexOf(":", at);
          key = JSON.stringify(literal.slice(at, colon).trim());
          at = colon;
        }
        skip();
        at++; // the colon
        return `${key}: ${value()}`;
      });
      return `{${members.join(", ")}}`;
    }
    const bare = /^[^,\]}\s]+/.exec(literal.slice(at))?.[0] ?? "";
    at += bare.length;
    return bare;
  };
  return value();
}

/**
 * GBNF for a function's keyword arguments: the required parameters in the schema's order, then
 * any of the others, each once or more, separated by the syntax's separator; each value written
 * as the syntax writes it (see pythonValueRule, gemmaValueRule).
 */
export function keywordArgumentsGbnf(tool: ToolDefinition, index: number, syntax: KeywordSyntax, rules: string[]): string {
  const required = new Set((tool.parameters as { required?: unknown }).required as string[] | undefined);
  const valueRule = syntax.literals === "python" ? pythonValueRule : gemmaValueRule;
  const parameters = Object.entries(propertiesOf(tool.parameters)).map(([name, schema], j) => {
    const rule = `tool${index}-kwarg${j}`;
    rules.push(`${rule} ::= ${gbnfLiteral(name + syntax.assign)} ${valueRule(schema, `tool${index}-k${j}-`, rules)}`);
    return { name, rule };
  });
  const separator = gbnfLiteral(syntax.separator);
  const mandatory = parameters.filter((each) => required.has(each.name)).map((each) => each.rule);
  const optional = parameters.filter((each) => !required.has(each.name)).map((each) => each.rule);
  const anyOptional = optional.length > 0 ? `(${optional.join(" | ")})` : undefined;
  if (mandatory.length > 0) return `${mandatory.join(` ${separator} `)}${anyOptional ? ` (${separator} ${anyOptional})*` : ""}`;
  return anyOptional ? `(${anyOptional} (${separator} ${anyOptional})*)?` : '""';
}

const PYTHON_STRING = `python-string ::= "'" ([^'\\\\] | "\\\\" [^\\n])* "'"`;

/**
 * A Python value: a string a single-quoted Python string, an enum of strings one of its values
 * quoted so, a boolean `True` or `False`, anything else JSON valid against its schema (a JSON value
 * is a Python literal too, but for true, false and null, which pythonToJson reads as they are).
 */
function pythonValueRule(schema: unknown, prefix: string, rules: string[]): string {
  const values = (schema as { enum?: unknown[] } | undefined)?.enum;
  if (isTextParameter(schema) && values?.every((value) => typeof value === "string")) {
    return `(${values.map((value) => gbnfLiteral(`'${(value as string).replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`)).join(" | ")})`;
  }
  if (isTextParameter(schema)) {
    if (!rules.includes(PYTHON_STRING)) rules.push(PYTHON_STRING);
    return "python-string";
  }
  if ((schema as { type?: unknown } | undefined)?.type === "boolean") return '("True" | "False")';
  return jsonRule(schema, prefix, rules);
}

/** Gemma 4's values (llama.cpp's gemma4-value rules): strings between `<|"|>`, without `<` here (as element text). */
const GEMMA_VALUE = [
  `gemma-string ::= ${gbnfLiteral(GEMMA_QUOTE)} [^<]* ${gbnfLiteral(GEMMA_QUOTE)}`,
  'gemma-value ::= gemma-string | gemma-dict | gemma-array | "-"? [0-9]+ ("." [0-9]+)? | "true" | "false" | "null"',
  'gemma-dict ::= "{" (gemma-member ("," gemma-member)*)? "}"',
  'gemma-member ::= [a-zA-Z_] [a-zA-Z0-9_]* ":" gemma-value',
  'gemma-array ::= "[" (gemma-value ("," gemma-value)*)? "]"',
];

/**
 * A Gemma 4 value: a string between `<|"|>`, an enum of strings one of its values so; a number,
 * integer, boolean or null JSON valid against its schema (Gemma writes them as JSON does); an array
 * or object any Gemma value, its shape unchecked, as llama.cpp's grammar leaves all of Gemma's
 * arguments (its json-schema-to-grammar writes only JSON).
 */
function gemmaValueRule(schema: unknown, prefix: string, rules: string[]): string {
  const values = (schema as { enum?: unknown[] } | undefined)?.enum;
  if (isTextParameter(schema) && values?.every((value) => typeof value === "string")) {
    return `(${values.map((value) => gbnfLiteral(GEMMA_QUOTE + (value as string) + GEMMA_QUOTE)).join(" | ")})`;
  }
  const type = (schema as { type?: unknown } | undefined)?.type;
  if (type === "number" || type === "integer" || type === "boolean" || type === "null") return jsonRule(schema, prefix, rules);
  for (const rule of GEMMA_VALUE) if (!rules.includes(rule)) rules.push(rule);
  return isTextParameter(schema) ? "gemma-string" : "gemma-value";
}

function jsonRule(schema: unknown, prefix: string, rules: string[]): string {
  const json = jsonSchemaToGbnf(typeof schema === "object" && schema !== null ? schema : true, { prefix });
  rules.push(...json.rules);
  return json.root;
}
