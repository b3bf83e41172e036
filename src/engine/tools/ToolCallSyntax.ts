import { LlamaText, type ChatWrapper } from "node-llama-cpp";
import type { CallDelimiters } from "./ToolCallParser.js";

/**
 * How a chat template writes function calls: e.g. for Qwen-style templates
 * `<tool_call>\n{"name": "` NAME `", "arguments": ` JSON `}\n</tool_call>`, calls separated by
 * "\n"; for templates without tool support, node-llama-cpp's documented generic syntax
 * `||call: NAME(JSON)`, which its wrappers explain to the model in the system prompt.
 * Kept as LlamaText: parts of it may be control tokens, which must be tokenized as such.
 */
export interface ToolCallSyntax {
  /** Opens a group of calls (often empty). */
  sectionPrefix: LlamaText;
  /** Opens one call; the function's name follows. */
  prefix: LlamaText;
  /** Other ways models open a call, recognised in `auto` mode. */
  prefixAlternates: string[];
  /** Between the name and the JSON arguments. */
  paramsPrefix: LlamaText;
  /** Closes one call. */
  suffix: LlamaText;
  /** Between two calls of one reply. */
  betweenCalls: LlamaText;
}

export function toolCallSyntaxOf(wrapper: ChatWrapper): ToolCallSyntax {
  const { call, parallelism } = wrapper.settings.functions;
  const text = (value: unknown) => LlamaText(value as never);
  return {
    sectionPrefix: text(parallelism?.call.sectionPrefix ?? ""),
    prefix: text(call.prefix),
    prefixAlternates: (call.prefixAlternateMatches ?? []).map((alternate) => text(alternate).toString()),
    paramsPrefix: text(call.paramsPrefix),
    suffix: text(call.suffix),
    betweenCalls: text(parallelism?.call.betweenCalls ?? ""),
  };
}

/** The delimiters as the text the detokenizer shows (control tokens included). */
export function callDelimitersOf(syntax: ToolCallSyntax): CallDelimiters {
  return {
    paramsPrefix: syntax.paramsPrefix.toString(),
    suffix: syntax.suffix.toString(),
    nextCall: syntax.betweenCalls.toString() + syntax.prefix.toString(),
  };
}

/**
 * Texts that open a call in free text: the prefix with and without the section prefix, and known
 * alternates, each cut at its first line break. A model that writes `<tool_call>` is opening a call
 * whatever whitespace it would put next (vLLM's Hermes parser reads it the same way); the rewind
 * then writes the template's exact prefix and the grammar takes over.
 */
export function callOpenersOf(syntax: ToolCallSyntax): string[] {
  const prefix = syntax.prefix.toString();
  const firstLine = (text: string) => text.split("\n")[0] || text;
  return [syntax.sectionPrefix.toString() + prefix, prefix, ...syntax.prefixAlternates].map(firstLine);
}
