/**
 * The first characters of a reply whose prompt leaves it to name its recipient (Functionary v3.2's
 * generation prompt ends with `>>>`): the text's header (`all\n`) is left out of the text, a call's
 * opening (`get_weather\n`, in auto mode) opens a call, and anything else is text as it is. Text is
 * held back only while it may still become one of them.
 */
export class ReplyStart {
  readonly #header: string;
  readonly #openers: readonly string[];
  #held = "";
  #decided = false;
  /** The header, once the reply has written it: the sequence holds it before the text. */
  dropped = "";

  constructor(header: string, openers: readonly string[]) {
    this.#header = header;
    this.#openers = openers.filter((opener) => opener !== "");
  }

  /** The text to give out, or that a call opens (the text held is then the call's, not given out). */
  push(text: string): { text: string; call: boolean } {
    if (this.#decided) return { text, call: false };
    const held = this.#held + text;
    if (this.#header !== "" && held.startsWith(this.#header)) {
      this.#settle();
      this.dropped = this.#header;
      return { text: held.slice(this.#header.length), call: false };
    }
    if (this.#openers.some((opener) => held.startsWith(opener))) {
      this.#settle();
      return { text: "", call: true };
    }
    if ([this.#header, ...this.#openers].some((each) => each !== "" && each.startsWith(held))) {
      this.#held = held;
      return { text: "", call: false };
    }
    this.#settle();
    return { text: held, call: false };
  }

  /** What is held when the reply ends: text after all. */
  flush(): string {
    const held = this.#held;
    this.#settle();
    return held;
  }

  #settle(): void {
    this.#decided = true;
    this.#held = "";
  }
}
