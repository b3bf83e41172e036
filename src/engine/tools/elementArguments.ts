/**
 * Arguments written one element per parameter, as Qwen3-Coder (`<parameter=city>\nParis\n</parameter>`),
 * GLM 4.5, MiniMax-M2 and Seed-OSS write them: read back into the JSON object they stand for, and
 * the grammar that keeps a model's to its function's schema.
 */
import type { ParameterSyntax } from "../../chatTemplates/chatFormats.js";
import type { ToolDefinition } from "../../core/ChatRequest.js";
import { gbnfLiteral, jsonSchemaToGbnf } from "../jsonSchemaToGbnf.js";
import { isTextParameter, propertiesOf } from "./ToolCallSyntax.js";

/**
 * Reads arguments written one element per parameter (`<parameter=city>\nParis\n</parameter>\n`, as
 * Qwen3-Coder writes them) into the JSON object they stand for, a parameter at a time: a string
 * parameter's value is its text, another's is JSON. The arguments end at the first text that cannot
 * open another parameter (the call's suffix).
 */
export class ParameterElements {
  readonly #syntax: ParameterSyntax;
  readonly #isText: (parameter: string) => boolean;
  #state: "between" | "name" | "value" = "between";
  #name = "";
  #count = 0;

  constructor(syntax: ParameterSyntax, isText: (parameter: string) => boolean) {
    this.#syntax = syntax;
    this.#isText = isText;
  }

  /** Reads what it can of `text`: the JSON text of the parameters completed in it, how much of `text` it took, and whether the arguments ended. */
  read(text: string): { json: string; consumed: number; done: boolean } {
    const { prefix, nameEnd, valueEnd } = this.#syntax;
    let json = "";
    let at = 0;
    for (;;) {
      const rest = text.slice(at);
      if (this.#state === "between") {
        if (rest.startsWith(prefix)) {
          at += prefix.length;
          this.#state = "name";
          continue;
        }
        // Held while it may still become another parameter.
        if (prefix.startsWith(rest)) return { json, consumed: at, done: false };
        return { json: json + (this.#count === 0 ? "{}" : "}"), consumed: at, done: true };
      }
      const end = rest.indexOf(this.#state === "name" ? nameEnd : valueEnd);
      if (end === -1) return { json, consumed: at, done: false };
      if (this.#state === "name") {
        this.#name = rest.slice(0, end);
        at += end + nameEnd.length;
        this.#state = "value";
        continue;
      }
      const value = rest.slice(0, end);
      json += `${this.#count++ === 0 ? "{" : ", "}${JSON.stringify(this.#name)}: ${this.#isText(this.#name) ? JSON.stringify(value) : value.trim() || "null"}`;
      at += end + valueEnd.length;
      this.#state = "between";
    }
  }
}

/**
 * GBNF for arguments written one element per parameter (Qwen3-Coder's XML), in the schema's order,
 * the required ones always: a string's value is text without `<` (which would open the closing
 * element), an enum of strings one of its values, anything else JSON valid against its schema.
 */
export function elementArgumentsGbnf(tool: ToolDefinition, index: number, syntax: ParameterSyntax, rules: string[]): string {
  const required = new Set((tool.parameters as { required?: unknown }).required as string[] | undefined);
  const elements = Object.entries(propertiesOf(tool.parameters)).map(([name, schema], j) => {
    const rule = `tool${index}-param${j}`;
    rules.push(
      `${rule} ::= ${gbnfLiteral(syntax.prefix + name + syntax.nameEnd)} ${valueRule(schema, `tool${index}-p${j}-`, rules)} ${gbnfLiteral(syntax.valueEnd)}`,
    );
    return required.has(name) ? rule : `${rule}?`;
  });
  return elements.length > 0 ? `(${elements.join(" ")})` : '""';
}

function valueRule(schema: unknown, prefix: string, rules: string[]): string {
  const values = (schema as { enum?: unknown[] } | undefined)?.enum;
  if (isTextParameter(schema) && values?.every((value) => typeof value === "string"))
    return `(${values.map((value) => gbnfLiteral(value as string)).join(" | ")})`;
  if (isTextParameter(schema)) {
    if (!rules.includes(ELEMENT_TEXT)) rules.push(ELEMENT_TEXT);
    return "element-text";
  }
  const json = jsonSchemaToGbnf(typeof schema === "object" && schema !== null ? schema : true, { prefix });
  rules.push(...json.rules);
  return json.root;
}

const ELEMENT_TEXT = "element-text ::= [^<]*";
