import { LlamaText, type ChatWrapper } from "node-llama-cpp";
import type { CallSyntax } from "../../chatTemplates/chatFormats.js";
import type { ToolDefinition } from "../../core/ChatRequest.js";
import { fixedStart } from "./callPlaceholders.js";
import type { CallDelimiters } from "./ToolCallParser.js";

/**
 * The call syntax of one of node-llama-cpp's chat wrappers (for files without a chat template): for
 * templates without tool support, its documented generic syntax `||call: NAME(JSON)`, which its
 * wrappers explain to the model in the system prompt. Alternate openers are other ways its models
 * open a call, recognised in `auto` mode.
 */
export function wrapperCallSyntax(wrapper: ChatWrapper): CallSyntax {
  const { call, parallelism } = wrapper.settings.functions;
  const text = (value: unknown) => LlamaText(value as never).toString();
  return {
    sectionPrefix: text(parallelism?.call.sectionPrefix ?? ""),
    prefix: text(call.prefix),
    paramsPrefix: text(call.paramsPrefix),
    suffix: text(call.suffix),
    betweenCalls: text(parallelism?.call.betweenCalls ?? ""),
    sectionSuffix: text(parallelism?.call.sectionSuffix ?? ""),
    parallel: true,
    alternates: (call.prefixAlternateMatches ?? []).map(text),
  };
}

/** The delimiters as the text the detokenizer shows (control tokens included), for calls of `tools`. */
export function callDelimitersOf(syntax: CallSyntax, tools: readonly ToolDefinition[] = []): CallDelimiters {
  const { parameters } = syntax;
  return {
    paramsPrefix: syntax.paramsPrefix,
    suffix: syntax.suffix,
    nextCall: syntax.betweenCalls + syntax.prefix,
    sectionSuffix: syntax.sectionSuffix,
    ...(syntax.keywordArguments ? { keywordArguments: syntax.keywordArguments } : {}),
    ...(parameters
      ? {
          parameters: {
            ...parameters,
            isText: (tool: string, parameter: string) => {
              const schema = tools.find((each) => each.name === tool)?.parameters;
              return isTextParameter(propertiesOf(schema)[parameter]);
            },
          },
        }
      : {}),
  };
}

/** A JSON Schema object's properties, or none. */
export function propertiesOf(schema: unknown): Record<string, unknown> {
  const properties = (schema as { properties?: unknown } | undefined)?.properties;
  return typeof properties === "object" && properties !== null ? (properties as Record<string, unknown>) : {};
}

/** A parameter written as text in element syntaxes: a string, or an enum of strings. */
export function isTextParameter(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  const { type, enum: values } = schema as { type?: unknown; enum?: unknown };
  if (type === "string") return true;
  return type === undefined && Array.isArray(values) && values.length > 0 && values.every((value) => typeof value === "string");
}

/**
 * Texts that open a call in free text: the prefix with and without the section prefix, the section
 * prefix alone (Mistral's `[TOOL_CALLS][`), and known alternates, each cut at its first line break. A model that writes `<tool_call>` is opening a call
 * whatever whitespace it would put next (vLLM's Hermes parser reads it the same way); the rewind
 * then writes the template's exact prefix and the grammar takes over.
 */
export function callOpenersOf(syntax: CallSyntax): string[] {
  // Up to the first line break, and up to a call index or id, which the model may write as it likes.
  const firstLine = (text: string) => fixedStart(text.split("\n")[0] || text);
  const openers = [syntax.sectionPrefix + syntax.prefix, syntax.sectionPrefix, syntax.prefix, ...(syntax.alternates ?? [])].map(firstLine);
  return [...new Set(openers.filter((opener) => opener.trim() !== ""))];
}
