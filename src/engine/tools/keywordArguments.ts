/**
 * Arguments written as a Python call's keyword arguments, as LFM2 writes its calls
 * (`[get_weather(city='Paris', days=3)]`): read back into the JSON object they stand for, and the
 * grammar that keeps a model's to its function's schema.
 */
import type { ToolDefinition } from "../../core/ChatRequest.js";
import { gbnfLiteral, jsonSchemaToGbnf } from "../jsonSchemaToGbnf.js";
import { isTextParameter, propertiesOf } from "./ToolCallSyntax.js";

/**
 * Reads `key=value, key=value` as it arrives, a parameter at a time, up to the `)` that closes the
 * call (left for the caller, as the call's suffix): each value a Python literal (quoted strings,
 * numbers, True, False, None, lists and dicts), given out as JSON.
 */
export class KeywordArguments {
  #count = 0;

  /** Reads what it can of `text`: the JSON text of the parameters completed in it, how much of `text` it took, and whether the arguments ended. */
  read(text: string): { json: string; consumed: number; done: boolean } {
    let json = "";
    let at = 0;
    for (;;) {
      const rest = text.slice(at);
      const next = rest.trimStart();
      const lead = rest.length - next.length;
      if (next.startsWith(")")) return { json: json + (this.#count === 0 ? "{}" : "}"), consumed: at + lead, done: true };
      // After a parameter, a comma comes before the next one.
      const start = this.#count === 0 ? lead : next.startsWith(",") ? lead + 1 : -1;
      if (start === -1) return { json, consumed: at, done: false };
      const equals = rest.indexOf("=", start);
      const end = equals === -1 ? undefined : literalEnd(rest, equals + 1);
      if (end === undefined) return { json, consumed: at, done: false };
      const name = rest.slice(start, equals).trim();
      json += `${this.#count++ === 0 ? "{" : ", "}${JSON.stringify(name)}: ${pythonToJson(rest.slice(equals + 1, end).trim())}`;
      at += end;
    }
  }
}

/**
 * Where the Python literal starting at `from` ends: before the first `,` or `)` outside strings and
 * brackets, once such a character has arrived; undefined while the text may go on.
 */
function literalEnd(text: string, from: number): number | undefined {
  let depth = 0;
  let quote: string | undefined;
  for (let i = from; i < text.length; i++) {
    const char = text[i]!;
    if (quote !== undefined) {
      if (char === "\\") i++;
      else if (char === quote) quote = undefined;
    } else if (char === "'" || char === '"') quote = char;
    else if (char === "[" || char === "{" || char === "(") depth++;
    else if (char === "]" || char === "}" || (char === ")" && depth > 0)) depth--;
    else if (depth === 0 && (char === "," || char === ")")) return i;
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
 * GBNF for a function's keyword arguments: the required parameters in the schema's order, then
 * any of the others, each once or more, separated by `, `; a string a single-quoted Python string,
 * an enum of strings one of its values quoted so, a boolean `True` or `False`, anything else JSON
 * valid against its schema (a JSON value is a Python literal too, but for true, false and null,
 * which pythonToJson reads as they are).
 */
export function keywordArgumentsGbnf(tool: ToolDefinition, index: number, rules: string[]): string {
  const required = new Set((tool.parameters as { required?: unknown }).required as string[] | undefined);
  const parameters = Object.entries(propertiesOf(tool.parameters)).map(([name, schema], j) => {
    const rule = `tool${index}-kwarg${j}`;
    rules.push(`${rule} ::= ${gbnfLiteral(`${name}=`)} ${pythonValueRule(schema, `tool${index}-k${j}-`, rules)}`);
    return { name, rule };
  });
  const mandatory = parameters.filter((each) => required.has(each.name)).map((each) => each.rule);
  const optional = parameters.filter((each) => !required.has(each.name)).map((each) => each.rule);
  const anyOptional = optional.length > 0 ? `(${optional.join(" | ")})` : undefined;
  if (mandatory.length > 0) return `${mandatory.join(' ", " ')}${anyOptional ? ` (", " ${anyOptional})*` : ""}`;
  return anyOptional ? `(${anyOptional} (", " ${anyOptional})*)?` : '""';
}

const PYTHON_STRING = `python-string ::= "'" ([^'\\\\] | "\\\\" [^\\n])* "'"`;

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
  const json = jsonSchemaToGbnf(typeof schema === "object" && schema !== null ? schema : true, { prefix });
  rules.push(...json.rules);
  return json.root;
}
