import type { ResponseFormat, ToolDefinition } from "../../core/ChatRequest.js";
import { gbnfLiteral, jsonObjectGbnf, jsonSchemaToGbnf } from "../jsonSchemaToGbnf.js";
import { delimiterGbnf } from "./callPlaceholders.js";
import { elementArgumentsGbnf } from "./elementArguments.js";
import { keywordArgumentsGbnf } from "./keywordArguments.js";
import type { CallDelimiters } from "./ToolCallParser.js";

export interface ToolCallGrammarOptions {
  tools: readonly ToolDefinition[];
  delimiters: CallDelimiters;
  /** Whether further calls may follow the first (parallel_tool_calls). */
  parallel: boolean;
  /** A named tool_choice: the name is already written, the grammar starts at its arguments. */
  named?: string;
}

/**
 * GBNF for a call section from just after the first call's opener: a function name (one of the
 * tools), the template's text before the arguments, arguments valid against that function's
 * schema, the closing text, and, if parallel calls are allowed, more calls after the separator.
 * When the grammar is complete llama.cpp allows only end-of-generation tokens, so the turn ends.
 */
export function toolCallGrammar({ tools, delimiters, parallel, named }: ToolCallGrammarOptions): string {
  const rules: string[] = [];
  const argumentsRule = (tool: ToolDefinition, index: number): string => {
    if (delimiters.parameters) return elementArgumentsGbnf(tool, index, delimiters.parameters, rules);
    if (delimiters.keywordArguments) return keywordArgumentsGbnf(tool, index, delimiters.keywordArguments, rules);
    const schema = jsonSchemaToGbnf(tool.parameters, { prefix: `tool${index}-` });
    rules.push(...schema.rules);
    return schema.root;
  };
  const suffix = gbnfLiteral(delimiters.suffix);
  const sectionSuffix = gbnfLiteral(delimiters.sectionSuffix);
  if (named !== undefined) {
    const index = tools.findIndex((tool) => tool.name === named);
    const tool = tools[index];
    if (!tool) throw new Error(`no tool named ${named}`);
    return [`root ::= ${argumentsRule(tool, index)} ${suffix} ${sectionSuffix}`, ...rules].join("\n");
  }
  const alternatives = tools.map(
    (tool, index) => `${gbnfLiteral(tool.name)} ${delimiterGbnf(delimiters.paramsPrefix)} ${argumentsRule(tool, index)}`,
  );
  const root = parallel ? `root ::= call (${delimiterGbnf(delimiters.nextCall)} call)* ${sectionSuffix}` : `root ::= call ${sectionSuffix}`;
  return [root, `call ::= (${alternatives.join(" | ")}) ${suffix}`, ...rules].join("\n");
}

/** GBNF for the reply's text under response_format, or undefined for free text. */
export function responseFormatGrammar(format: ResponseFormat): string | undefined {
  switch (format.type) {
    case "text":
      return undefined;
    case "json_object": {
      const object = jsonObjectGbnf("json-");
      return [`root ::= ${object.root}`, ...object.rules].join("\n");
    }
    case "json_schema": {
      const schema = jsonSchemaToGbnf(format.schema, { prefix: "schema-" });
      return [`root ::= ${schema.root}`, ...schema.rules].join("\n");
    }
    default:
      return format satisfies never;
  }
}
