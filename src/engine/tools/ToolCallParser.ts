import type { KeywordSyntax, ParameterSyntax } from "../../chatTemplates/chatFormats.js";
import { findDelimiter } from "./callPlaceholders.js";
import { ParameterElements } from "./elementArguments.js";
import { KeywordArguments } from "./keywordArguments.js";

export type ToolCallParserEvent =
  { type: "start"; index: number; name: string } | { type: "arguments"; index: number; text: string } | { type: "end"; index: number };

export interface CallDelimiters {
  /** Between the name and the JSON arguments. */
  paramsPrefix: string;
  /** Closes one call (may be empty: Llama 3.x's calls end with their arguments' own `}`). */
  suffix: string;
  /** Between the end of one call and the name of the next: the separator, then the call prefix. */
  nextCall: string;
  /** Closes the group of calls (Mistral Nemo's `]`); may be empty. */
  sectionSuffix: string;
  /** Arguments as keyword arguments (LFM2's Python ones, Gemma 4's), read back into a JSON object. */
  keywordArguments?: KeywordSyntax;
  /** Arguments as one element per parameter (Qwen3-Coder's XML), read back into a JSON object. */
  parameters?: ParameterSyntax & {
    /** Whether the function's parameter is a string, whose value is written as text, not as JSON. */
    isText(tool: string, parameter: string): boolean;
  };
}

type State =
  | { kind: "name" }
  | { kind: "arguments"; index: number; value: JsonValueEnd | ParameterElements | KeywordArguments }
  | { kind: "suffix"; index: number }
  | { kind: "between" };

/**
 * Reads the text of a call section as it is generated, starting just after the first call's
 * prefix, and reports each call's name as soon as it is complete and its arguments piece by piece.
 * Decoding is grammar-constrained, so the text is well formed. The arguments end where their JSON
 * value ends, found by reading its structure, not by searching for the suffix: a suffix may be
 * empty, or occur inside the arguments (Mistral's `}` or `]` in a nested object or a string).
 */
export class ToolCallParser {
  readonly #delimiters: CallDelimiters;
  #state: State;
  #buffer = "";
  #calls = 0;

  /** `startedCall`: the first call's name was already given (a named tool_choice), so its arguments come first. */
  constructor(delimiters: CallDelimiters, startedCall?: { name: string }) {
    this.#delimiters = delimiters;
    if (startedCall) {
      this.#state = { kind: "arguments", index: 0, value: this.#argumentsOf(startedCall.name) };
      this.#calls = 1;
    } else {
      this.#state = { kind: "name" };
    }
  }

  /** How the arguments of a call of `tool` are read: a JSON value, or one element per parameter. */
  #argumentsOf(tool: string): JsonValueEnd | ParameterElements | KeywordArguments {
    if (this.#delimiters.keywordArguments) return new KeywordArguments(this.#delimiters.keywordArguments);
    const parameters = this.#delimiters.parameters;
    return parameters ? new ParameterElements(parameters, (name) => parameters.isText(tool, name)) : new JsonValueEnd();
  }

  get calls(): number {
    return this.#calls;
  }

  push(text: string): ToolCallParserEvent[] {
    this.#buffer += text;
    const events: ToolCallParserEvent[] = [];
    for (;;) {
      const state = this.#state;
      switch (state.kind) {
        case "name": {
          const found = findDelimiter(this.#buffer, this.#delimiters.paramsPrefix);
          if (found === undefined) return events;
          const { at, length } = found;
          const index = this.#calls++;
          const name = this.#buffer.slice(0, at);
          events.push({ type: "start", index, name });
          this.#buffer = this.#buffer.slice(at + length);
          this.#state = { kind: "arguments", index, value: this.#argumentsOf(name) };
          break;
        }
        case "arguments": {
          if (!(state.value instanceof JsonValueEnd)) {
            const { json, consumed, done } = state.value.read(this.#buffer);
            if (json !== "") events.push({ type: "arguments", index: state.index, text: json });
            this.#buffer = this.#buffer.slice(consumed);
            if (!done) return events;
            this.#state = { kind: "suffix", index: state.index };
            break;
          }
          const end = state.value.read(this.#buffer);
          if (end === undefined) {
            // All of it belongs to the arguments, which are not complete yet.
            if (this.#buffer !== "") events.push({ type: "arguments", index: state.index, text: this.#buffer });
            this.#buffer = "";
            return events;
          }
          if (end > 0) events.push({ type: "arguments", index: state.index, text: this.#buffer.slice(0, end) });
          this.#buffer = this.#buffer.slice(end);
          this.#state = { kind: "suffix", index: state.index };
          break;
        }
        case "suffix": {
          const { suffix } = this.#delimiters;
          // Held back while it may still become the suffix (which can arrive over several tokens).
          if (this.#buffer.length < suffix.length && suffix.startsWith(this.#buffer)) return events;
          if (this.#buffer.startsWith(suffix)) this.#buffer = this.#buffer.slice(suffix.length);
          events.push({ type: "end", index: state.index });
          this.#state = { kind: "between" };
          break;
        }
        case "between": {
          const found = findDelimiter(this.#buffer, this.#delimiters.nextCall);
          if (found === undefined) return events;
          this.#buffer = this.#buffer.slice(found.at + found.length);
          this.#state = { kind: "name" };
          break;
        }
        default:
          return state satisfies never;
      }
    }
  }
}

/**
 * Finds where one JSON value ends in text that arrives piece by piece: counts the nesting of
 * objects and arrays outside strings (escapes included), from the value's first character. An
 * object, array or string ends at its closing character; a bare number or literal (arguments are
 * objects, so only a malformed call has one) ends before the first character that cannot continue it.
 */
class JsonValueEnd {
  #depth = 0;
  #started = false;
  #bare = false;
  #inString = false;
  #escaped = false;

  /** Reads the value's next text: where the value ends in it, or undefined if it goes on past it. */
  read(text: string): number | undefined {
    for (let i = 0; i < text.length; i++) {
      const char = text[i]!;
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (char === "\\") this.#escaped = true;
        else if (char === '"') {
          this.#inString = false;
          if (this.#depth === 0) return i + 1;
        }
      } else if (!this.#started) {
        if (/\s/.test(char)) continue;
        this.#started = true;
        if (char === '"') this.#inString = true;
        else if (char === "{" || char === "[") this.#depth = 1;
        else this.#bare = true;
      } else if (this.#bare) {
        if (!/[\w.+-]/.test(char)) return i;
      } else if (char === '"') this.#inString = true;
      else if (char === "{" || char === "[") this.#depth++;
      else if ((char === "}" || char === "]") && --this.#depth === 0) return i + 1;
    }
    return undefined;
  }
}
