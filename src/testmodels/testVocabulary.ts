// The test models' own small tokenizer: byte-level BPE in the GPT-2 / Qwen2 style, which llama.cpp
// loads as `tokenizer.ggml.model = "gpt2"`.
//
// Byte-level means every UTF-8 byte has a base token (GPT-2's byte-to-unicode symbols), so any
// text can be tokenized without an unknown token and detokenized back to the same bytes. The
// merges are learned, deterministically, from a short English sample so the vocabulary contains
// realistic pieces ("Ġthe", "ing", ...) and ordinary text takes fewer tokens than bytes.
//
// The pre-tokenizer is "qwen2": llama.cpp's "default" and "gpt-2" pre-tokenizers enable its
// clean_spaces detokenizer pass, which deletes the space in " ," / " ." / " 's" and so breaks
// the round trip; "qwen2" turns that pass off and matches the ChatML template the models carry.

import { trainPairMerges } from "./trainPairMerges.js";

/** llama.cpp's llama_token_type values, as stored in `tokenizer.ggml.token_type`. */
export const TokenType = { normal: 1, control: 3, userDefined: 4, unused: 5 } as const;

export interface TestVocabulary {
  /** `tokenizer.ggml.model` */
  readonly model: "gpt2";
  /** `tokenizer.ggml.pre` */
  readonly pre: "qwen2";
  /** Token texts by id; byte-level tokens are spelled with GPT-2's byte symbols ("Ġ" is a space). */
  readonly tokens: readonly string[];
  readonly tokenTypes: readonly number[];
  /** BPE merges, highest priority first, as "left right". */
  readonly merges: readonly string[];
  readonly bosId: number;
  readonly eosId: number;
  readonly eotId: number;
  readonly padId: number;
}

/** Control tokens of ChatML, as Qwen2 numbers them (after the BPE tokens). */
const CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

/**
 * Tool-calling markers, added as plain-text (user-defined) tokens the way Qwen2.5 has them:
 * they are always tokenized as one token and detokenized as their text, special or not.
 */
const USER_DEFINED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"] as const;

/** How many merges to learn; with 256 byte tokens and 7 added tokens the vocabulary has 463 tokens. */
const MERGE_COUNT = 200;

/**
 * llama.cpp's QWEN2 pre-tokenizer regex (src/llama-vocab.cpp), which splits text into words
 * before BPE; training on the same words makes the merges apply to them.
 */
export const PRE_TOKENIZER =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** Original English text the merges are learned from. Changing it changes the vocabulary. */
const TRAINING_TEXT = `The small town by the river was quiet in the early morning. When the first light came over the hills, the people who lived there would open their windows and look out at the water. Some of them walked down to the old bridge to see the boats, and others stayed at home to make breakfast for their children.

There was a little shop on the corner that sold bread, milk and fresh fruit. The woman who owned it had been there for many years. She knew the name of every person who came in, and she would always ask how they were feeling. "It's a fine day," she said to a young man one morning. "Are you going to the market?" He smiled and answered that he was going to meet his brother, who had just come back from the city.

In the afternoon the weather changed. Dark clouds moved in from the west, and the wind began to blow through the trees. The children ran inside, and the shopkeeper brought the tables in from the street. It rained for two hours, and then the sun came out again, as if nothing had happened. The streets were wet and bright, and the air smelled of grass and stone.

People often think that nothing interesting happens in a place like this, but that is not true. Every day there is something new to learn: a story about the past, a recipe for soup, a better way to fix a broken chair. The old teacher who lived near the school liked to say that the most important thing is to keep asking questions. "If you don't ask," he would tell his students, "you will never know what you could have found."

In the evening the lights in the houses came on one by one. Families sat together at the table, talked about their work, and made plans for the next day. Some read books, some wrote letters, and some simply listened to the sound of the river. Later, when the town was asleep, only the wind and the water were still moving, and the stars were shining over the hills.

The next morning, at 7:30, the first train arrived with 42 passengers. They had traveled for three days to reach this place, and they were tired but happy. One of them, a writer, said that she had never seen such a beautiful valley. She stayed for a week, and when she left, she promised to return in the spring with her friends.`;

let cached: TestVocabulary | undefined;

/** The test vocabulary; built on first use (a few milliseconds) and then reused. */
export function testVocabulary(): TestVocabulary {
  cached ??= buildVocabulary();
  return cached;
}

function buildVocabulary(): TestVocabulary {
  const merges = learnMerges(TRAINING_TEXT, MERGE_COUNT);
  // Two merges can spell the same token ("a bc", "ab c"); a token is listed once.
  const bpeTokens = [...new Set([...byteTokens(), ...merges.map((merge) => merge.replace(" ", ""))])];
  const tokens = [...bpeTokens, ...CONTROL_TOKENS, ...USER_DEFINED_TOKENS];
  const tokenTypes = [
    ...bpeTokens.map(() => TokenType.normal),
    ...CONTROL_TOKENS.map(() => TokenType.control),
    ...USER_DEFINED_TOKENS.map(() => TokenType.userDefined),
  ];
  const idOf = (token: string): number => tokens.indexOf(token);
  return {
    model: "gpt2",
    pre: "qwen2",
    tokens,
    tokenTypes,
    merges,
    // As in Qwen2.5: <|endoftext|> is BOS and padding (BOS is not added to prompts), and a chat
    // turn ends with <|im_end|>, which is therefore EOS and end-of-turn.
    bosId: idOf("<|endoftext|>"),
    eosId: idOf("<|im_end|>"),
    eotId: idOf("<|im_end|>"),
    padId: idOf("<|endoftext|>"),
  };
}

/** GPT-2 keeps the printable Latin-1 bytes as themselves. */
function isPrintableByte(byte: number): boolean {
  return (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
}

/**
 * GPT-2's bytes_to_unicode, indexed by byte: printable bytes stand for themselves and the other
 * 68 (controls, space, soft hyphen...) are shifted to U+0100 and up, so every byte is one visible
 * character and BPE can work on strings ("Ġ" is a space, "Ċ" a newline).
 */
const BYTE_SYMBOLS: readonly string[] = (() => {
  let shifted = 0;
  return Array.from({ length: 256 }, (_, byte) => String.fromCharCode(isPrintableByte(byte) ? byte : 256 + shifted++));
})();

/** The test vocabulary's spelling of the token for one byte (its GPT-2 byte symbol). */
export function byteSymbol(byte: number): string {
  return BYTE_SYMBOLS[byte]!;
}

/** The byte symbols in GPT-2's vocabulary order: printable bytes first, then the shifted ones. */
function byteTokens(): string[] {
  return [...BYTE_SYMBOLS.filter((_, byte) => isPrintableByte(byte)), ...BYTE_SYMBOLS.filter((_, byte) => !isPrintableByte(byte))];
}

/** Maps each byte of the text's UTF-8 encoding to its GPT-2 byte symbol. */
export function byteEncode(text: string): string[] {
  return [...Buffer.from(text, "utf8")].map((byte) => BYTE_SYMBOLS[byte] ?? "");
}

/** Classic BPE training on the text's words, split by the pre-tokenizer, as byte symbols. */
function learnMerges(text: string, count: number): string[] {
  const wordCounts = new Map<string, number>();
  for (const word of text.match(PRE_TOKENIZER) ?? []) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
  const words = [...wordCounts].map(([word, frequency]) => ({ symbols: byteEncode(word), frequency }));

  return trainPairMerges(words, count).map(([left, right]) => `${left} ${right}`);
}
