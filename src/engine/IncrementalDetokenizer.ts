import type { LlamaModel, Token } from "node-llama-cpp";

/** A UTF-8 character is at most 4 bytes, so at most 4 byte-level tokens can be pending. */
const MAX_PENDING = 4;
const CONTEXT_TOKENS = 4;

/**
 * Turns generated tokens into text piece by piece. A token may hold only part of a UTF-8
 * character (byte-level vocabularies split emoji and CJK over several tokens); such tokens are held
 * until the character is complete, so a stream never carries a broken character.
 */
export class IncrementalDetokenizer {
  readonly #model: LlamaModel;
  readonly #specialTokens: boolean;
  #pending: Token[] = [];
  #context: Token[] = [];

  /** `specialTokens`: show control tokens as their text (tool-call syntax may use them). */
  constructor(model: LlamaModel, precedingTokens: readonly Token[] = [], specialTokens = false) {
    this.#model = model;
    this.#specialTokens = specialTokens;
    // An image's pseudo-tokens (negative) are no text to read spacing from.
    this.#context = precedingTokens.filter((token) => token >= 0).slice(-CONTEXT_TOKENS);
  }

  /** The text this token completes, possibly empty while a character is incomplete. */
  push(token: Token): string {
    this.#pending.push(token);
    // The preceding tokens let the detokenizer decide on leading spaces (SentencePiece) correctly.
    const text = this.#model.detokenize(this.#pending, this.#specialTokens, this.#context);
    if (text.endsWith("\uFFFD") && this.#pending.length < MAX_PENDING) return "";
    this.#context = [...this.#context, ...this.#pending].slice(-CONTEXT_TOKENS);
    this.#pending = [];
    return text;
  }
}
