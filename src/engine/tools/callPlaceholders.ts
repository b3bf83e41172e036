import { randomBase62 } from "../../core/randomBase62.js";
import { gbnfLiteral } from "../jsonSchemaToGbnf.js";

/**
 * Parts of a call's delimiters that vary from call to call, as a family writes them: `{index}` the
 * call's number (Kimi K2's `functions.NAME:0`, Command R7B's `"tool_call_id": "0"`), `{id}` a call
 * id (Mistral Small 3.2's `[CALL_ID]` and 9 letters and digits). Each has one pattern, in the
 * syntax GBNF and JavaScript regular expressions share, and what the first call of a reply gets
 * when the template writes its opening (a forced call).
 */
const PLACEHOLDERS: Record<string, { pattern: string; first: () => string }> = {
  // Up to three digits: a grammar cannot count calls, and an unbounded number would let a model write digits without end.
  "{index}": { pattern: "[0-9]{1,3}", first: () => "0" },
  "{id}": { pattern: "[a-zA-Z0-9]{9}", first: () => randomBase62(9) },
};

const SPLIT = /(\{index\}|\{id\})/;

/** The delimiter as GBNF: its literal parts, its placeholders their patterns. */
export function delimiterGbnf(text: string): string {
  return (
    text
      .split(SPLIT)
      .filter((part) => part !== "")
      .map((part) => PLACEHOLDERS[part]?.pattern ?? gbnfLiteral(part))
      .join(" ") || '""'
  );
}

/** Where the delimiter first occurs in `text`, its placeholders matching their patterns. */
export function findDelimiter(text: string, delimiter: string): { at: number; length: number } | undefined {
  if (!SPLIT.test(delimiter)) {
    const at = text.indexOf(delimiter);
    return at === -1 ? undefined : { at, length: delimiter.length };
  }
  const match = patternOf(delimiter).exec(text);
  return match ? { at: match.index, length: match[0].length } : undefined;
}

/** Each delimiter's expression, made once: the parser looks for delimiters as every token arrives. */
const patterns = new Map<string, RegExp>();

function patternOf(delimiter: string): RegExp {
  let pattern = patterns.get(delimiter);
  if (pattern === undefined) {
    const source = delimiter
      .split(SPLIT)
      .map((part) => PLACEHOLDERS[part]?.pattern ?? part.replaceAll(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("");
    pattern = new RegExp(source);
    patterns.set(delimiter, pattern);
  }
  return pattern;
}

/** The delimiter as the first call of a reply writes it. */
export function firstCallText(text: string): string {
  return text
    .split(SPLIT)
    .map((part) => PLACEHOLDERS[part]?.first() ?? part)
    .join("");
}

/** The delimiter up to its first placeholder: what is the same in every call. */
export function fixedStart(text: string): string {
  return text.split(SPLIT)[0]!;
}
