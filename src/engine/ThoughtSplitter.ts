import type { ThoughtMarkers } from "../chatTemplates/chatFormats.js";
import { pendingPrefixLength } from "./pendingPrefixLength.js";

export type { ThoughtMarkers };

export interface SplitText {
  /** Text of the thought, markers and surrounding blank lines left out. */
  thinking: string;
  /** Text of the answer. */
  text: string;
}

type State = "start" | "thought" | "answer";

/**
 * Splits a reply's streamed text into its thought section and its answer, piece by piece, as
 * llama-server's reasoning parser does for `<think>…</think>` templates: a thought is read only at
 * the very start of the reply (after any whitespace), its markers are never given out, and neither
 * are the line breaks next to them (Qwen3 writes `<think>\n…\n</think>\n\n`). Text that may be the
 * start of a marker, split over several tokens, is held back until the next piece decides it.
 * A reply that does not open with the marker is all answer; one that never closes its thought
 * (cut off by max_tokens) is all thought.
 */
export class ThoughtSplitter {
  readonly #markers: ThoughtMarkers;
  #state: State;
  /** Text not yet given out: a possible opening marker, or the end of the thought that may be a closing one. */
  #held = "";
  /** Whether thought text has been given out (its leading whitespace is skipped until then). */
  #thinking = false;
  /** Whether the answer has begun (the whitespace after the closing marker is skipped until then). */
  #answering = false;
  /** Whether the answer's leading whitespace is left out (after a thought; a reply without one keeps its text). */
  #trimAnswer = true;
  /** The answer headers still possible (gpt-oss's `<|start|>assistant`, then `<|channel|>final<|message|>`). */
  #headers: string[];
  /** The answer's start, held while it may still be a header. */
  #heldAnswer = "";
  /** The raw text of the thought section so far: markers, thought and the whitespace around them. */
  #raw = "";
  /** Pieces pushed before the answer began. */
  #pieces = 0;

  /** `opened`: the prompt already opened the thought (templates that prefill the opening marker). */
  constructor(markers: ThoughtMarkers, opened = false) {
    this.#markers = markers;
    this.#headers = [...(markers.answerHeaders ?? [])];
    this.#state = opened ? "thought" : "start";
  }

  /** What the model wrote before its answer, as it wrote it: a prompt that continues the reply needs it. */
  get raw(): string {
    return this.#raw;
  }

  /** How many of the pieces pushed (tokens, as the engine pushes them) were the thought section's. */
  get thoughtPieces(): number {
    return this.#state === "start" ? 0 : this.#pieces;
  }

  push(piece: string): SplitText {
    if (this.#state === "answer") return { thinking: "", text: this.#answer(piece) };
    this.#pieces++;
    this.#raw += piece;
    let buffer = this.#held + piece;
    this.#held = "";
    if (this.#state === "start") {
      const trimmed = buffer.trimStart();
      if (trimmed.startsWith(this.#markers.open)) {
        this.#state = "thought";
        buffer = trimmed.slice(this.#markers.open.length);
      } else if (this.#markers.open.startsWith(trimmed)) {
        this.#held = buffer;
        return { thinking: "", text: "" };
      } else {
        return { thinking: "", text: this.#toAnswer(buffer) };
      }
    }
    if (!this.#thinking) buffer = buffer.trimStart();
    const at = buffer.indexOf(this.#markers.close);
    if (at !== -1) {
      return { thinking: buffer.slice(0, at).trimEnd(), text: this.#toAnswer(buffer.slice(at + this.#markers.close.length)) };
    }
    // Held back: what may begin the closing marker, and trailing whitespace, which is given out
    // only if more thought follows it.
    const safe = buffer.slice(0, buffer.length - pendingPrefixLength(buffer, this.#markers.close)).trimEnd().length;
    const thinking = buffer.slice(0, safe);
    this.#held = buffer.slice(safe);
    if (thinking) this.#thinking = true;
    return { thinking, text: "" };
  }

  /** At the end of generation: what was held back, as thought inside a thought, as answer otherwise. */
  flush(): SplitText {
    const held = this.#held;
    this.#held = "";
    if (this.#state === "thought") return { thinking: this.#thinking ? held.trimEnd() : held.trim(), text: "" };
    if (this.#state === "start") return { thinking: "", text: this.#toAnswer(held) + this.#flushAnswer() };
    return { thinking: "", text: this.#flushAnswer() };
  }

  /** An answer too short to tell from a header is answer after all. */
  #flushAnswer(): string {
    const held = this.#heldAnswer;
    this.#heldAnswer = "";
    if (held) this.#answering = true;
    return held;
  }

  /** The answer begins with `rest`, the end of the text pushed last. */
  #toAnswer(rest: string): string {
    this.#state = "answer";
    this.#raw = this.#raw.slice(0, this.#raw.length - rest.length);
    // A reply without a thought keeps its text as written (but for a header of its answer).
    if (this.#raw === "") {
      this.#trimAnswer = false;
      this.#pieces = 0;
    }
    return this.#answer(rest);
  }

  #answer(piece: string): string {
    if (this.#answering) return piece;
    let text = this.#heldAnswer + piece;
    this.#heldAnswer = "";
    if (this.#trimAnswer) {
      const trimmed = text.trimStart();
      this.#raw += text.slice(0, text.length - trimmed.length);
      text = trimmed;
    }
    while (text !== "" && this.#headers.length > 0) {
      const header = this.#headers[0]!;
      if (text.startsWith(header)) {
        // Left out of the answer, kept in what the model wrote before it.
        this.#raw += header;
        text = text.slice(header.length);
        this.#headers.shift();
      } else if (header.startsWith(text)) {
        this.#heldAnswer = text;
        return "";
      } else {
        this.#headers.shift();
      }
    }
    if (text) this.#answering = true;
    return text;
  }
}
