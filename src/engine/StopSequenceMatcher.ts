import { pendingPrefixLength } from "./pendingPrefixLength.js";

export interface MatchResult {
  /** Text that is safe to send: it can no longer become part of a stop sequence. */
  text: string;
  /** A stop sequence was found; `text` ends just before it and generation must end. */
  stopped: boolean;
  /** When stopped: the stop sequence that was found (the earliest in the text). */
  matched?: string;
}

/**
 * Finds stop sequences in streamed text (or any markers, such as the opening of a tool call). Text that might be the start of a stop sequence is held
 * back until the next piece decides it, so a stop sequence never leaks into the output, even when
 * it arrives split across several tokens.
 */
export class StopSequenceMatcher {
  readonly #stops: string[];
  #held = "";

  constructor(stops: readonly string[]) {
    this.#stops = stops.filter((stop) => stop.length > 0);
  }

  push(piece: string): MatchResult {
    if (this.#stops.length === 0) return { text: piece, stopped: false };
    const text = this.#held + piece;
    let cut = -1;
    let matched = "";
    for (const stop of this.#stops) {
      const at = text.indexOf(stop);
      if (at !== -1 && (cut === -1 || at < cut)) {
        cut = at;
        matched = stop;
      }
    }
    if (cut !== -1) {
      this.#held = "";
      return { text: text.slice(0, cut), stopped: true, matched };
    }
    const keep = Math.max(0, ...this.#stops.map((stop) => pendingPrefixLength(text, stop)));
    this.#held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** Text still held back when generation ends for another reason. */
  flush(): string {
    const rest = this.#held;
    this.#held = "";
    return rest;
  }
}
