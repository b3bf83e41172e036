import { pendingPrefixLength } from "../pendingPrefixLength.js";

export type ToolCallParserEvent =
  { type: "start"; index: number; name: string } | { type: "arguments"; index: number; text: string } | { type: "end"; index: number };

export interface CallDelimiters {
  /** Between the name and the JSON arguments. */
  paramsPrefix: string;
  /** Closes one call. */
  suffix: string;
  /** Between the end of one call and the name of the next: the separator, then the call prefix. */
  nextCall: string;
}

type State = { kind: "name" } | { kind: "arguments"; index: number } | { kind: "between" };

/**
 * Reads the text of a call section as it is generated, starting just after the first call's
 * prefix, and reports each call's name as soon as it is complete and its arguments piece by piece.
 * Decoding is grammar-constrained, so the text is well formed; the parser only has to hold back
 * text that may turn out to be a delimiter (the suffix, say, arriving over several tokens).
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
      this.#state = { kind: "arguments", index: 0 };
      this.#calls = 1;
    } else {
      this.#state = { kind: "name" };
    }
  }

  get calls(): number {
    return this.#calls;
  }

  push(text: string): ToolCallParserEvent[] {
    this.#buffer += text;
    const events: ToolCallParserEvent[] = [];
    for (;;) {
      const state = this.#state;
      if (state.kind === "name") {
        const at = this.#buffer.indexOf(this.#delimiters.paramsPrefix);
        if (at === -1) return events;
        const index = this.#calls++;
        events.push({ type: "start", index, name: this.#buffer.slice(0, at) });
        this.#buffer = this.#buffer.slice(at + this.#delimiters.paramsPrefix.length);
        this.#state = { kind: "arguments", index };
      } else if (state.kind === "arguments") {
        const at = this.#buffer.indexOf(this.#delimiters.suffix);
        if (at === -1) {
          const safe = this.#buffer.length - pendingPrefixLength(this.#buffer, this.#delimiters.suffix);
          if (safe > 0) events.push({ type: "arguments", index: state.index, text: this.#buffer.slice(0, safe) });
          this.#buffer = this.#buffer.slice(safe);
          return events;
        }
        if (at > 0) events.push({ type: "arguments", index: state.index, text: this.#buffer.slice(0, at) });
        events.push({ type: "end", index: state.index });
        this.#buffer = this.#buffer.slice(at + this.#delimiters.suffix.length);
        this.#state = { kind: "between" };
      } else {
        const at = this.#buffer.indexOf(this.#delimiters.nextCall);
        if (at === -1) return events;
        this.#buffer = this.#buffer.slice(at + this.#delimiters.nextCall.length);
        this.#state = { kind: "name" };
      }
    }
  }
}
