import type { LlamaModel, Token } from "node-llama-cpp";

const utf8 = new TextEncoder();

/**
 * The raw UTF-8 bytes of single tokens, as llama.cpp's `llama_token_to_piece` writes them (what
 * llama-server reports as a token's `bytes`). node-llama-cpp 3.22.1 only detokenizes into a JS
 * string, where a token holding part of a character (byte-level vocabularies split emoji and CJK
 * over up to 4 tokens) has already become U+FFFD: so the bytes are read from the vocabulary's own
 * spelling of the token in the GGUF metadata, decoded the way llama.cpp decodes it:
 * - byte-level BPE (`gpt2`: Qwen, Llama 3, the test models): each character is one byte in GPT-2's
 *   byte-to-unicode alphabet ("Ġ" is a space);
 * - SentencePiece (`llama`: Llama 2, Mistral, Gemma): `<0xE2>` is that byte, "▁" is a space;
 *   WordPiece (`bert`) and Unigram (`t5`) spell a space "▁" too;
 * - any other vocabulary, and control tokens: the detokenized text, as UTF-8.
 * Looked up only when a request asks for logprobs or pieces, and cached per token.
 */
export class TokenBytes {
  readonly #model: LlamaModel;
  readonly #cache = new Map<Token, readonly number[]>();
  readonly #decode: ((text: string) => number[] | undefined) | undefined;
  readonly #vocabulary: readonly string[] | undefined;

  constructor(model: LlamaModel) {
    this.#model = model;
    const tokenizer = model.fileInfo.metadata.tokenizer?.ggml;
    this.#vocabulary = tokenizer?.tokens;
    this.#decode =
      tokenizer?.model === "gpt2"
        ? decodeByteLevel
        : PHANTOM_SPACE_VOCABULARIES.has(tokenizer?.model ?? "")
          ? decodeSentencePiece
          : undefined;
  }

  /**
   * A token's piece as llama-server's /tokenize and /detokenize give it (llama.cpp's
   * `common_token_to_piece`, special tokens shown): control tokens as their text, others as `of`.
   */
  piece(token: Token): readonly number[] {
    if (!this.#model.getTokenAttributes(token).control) return this.of(token);
    return [...utf8.encode(this.#model.detokenize([token], true))];
  }

  /** The tokens' pieces concatenated and read as UTF-8, as llama-server's /detokenize does (bytes that are not UTF-8 become U+FFFD). */
  text(tokens: readonly Token[]): string {
    return Buffer.from(tokens.flatMap((token) => this.piece(token))).toString("utf8");
  }

  /** Every token of the vocabulary with its bytes, read afresh (not cached); none when the GGUF lists no tokens. */
  *all(): Generator<readonly [Token, readonly number[]]> {
    const size = this.#vocabulary?.length ?? 0;
    for (let token = 0; token < size; token++) yield [token as Token, this.#read(token as Token)];
  }

  of(token: Token): readonly number[] {
    let bytes = this.#cache.get(token);
    if (bytes === undefined) {
      bytes = this.#read(token);
      this.#cache.set(token, bytes);
    }
    return bytes;
  }

  #read(token: Token): readonly number[] {
    const spelling = this.#vocabulary?.[token];
    const attributes = this.#model.getTokenAttributes(token);
    if (spelling !== undefined && this.#decode && (attributes.normal || attributes.byte || attributes.unknown)) {
      const bytes = this.#decode(spelling);
      if (bytes) return bytes;
    }
    return [...utf8.encode(this.#model.detokenize([token], false))];
  }
}

/** `tokenizer.ggml.model` of the vocabularies that spell a space "▁" (U+2581): SentencePiece, WordPiece (as llama.cpp's converter stores it), Unigram. */
const PHANTOM_SPACE_VOCABULARIES: ReadonlySet<string> = new Set(["llama", "bert", "t5"]);

/** GPT-2's byte-to-unicode alphabet, reversed: character code → byte. */
const BYTE_OF_SYMBOL: ReadonlyMap<number, number> = (() => {
  const map = new Map<number, number>();
  let extra = 0;
  for (let byte = 0; byte < 256; byte++) {
    // Printable Latin-1 bytes stand for themselves; the others are shifted past 255, in order.
    const printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    map.set(printable ? byte : 256 + extra++, byte);
  }
  return map;
})();

function decodeByteLevel(text: string): number[] | undefined {
  const bytes: number[] = [];
  for (const symbol of text) {
    const byte = BYTE_OF_SYMBOL.get(symbol.codePointAt(0)!);
    // Not in the alphabet: an added token spelled as plain text.
    if (byte === undefined) return undefined;
    bytes.push(byte);
  }
  return bytes;
}

function decodeSentencePiece(text: string): number[] {
  const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
  if (byte) return [parseInt(byte[1]!, 16)];
  return [...utf8.encode(text.replaceAll("\u2581", " "))];
}
