// Text to the test vocabulary's token texts, for writing the scripts of scripted test models
// (scriptWiring.ts): byte-level BPE with the vocabulary's merges, as llama.cpp tokenizes it.
import { byteEncode, byteSymbol, PRE_TOKENIZER, testVocabulary, TokenType, type TestVocabulary } from "./testVocabulary.js";

/**
 * The token texts llama.cpp would give `text` with the test vocabulary, in its byte-symbol spelling
 * ("Ċ" a newline, "Ġsky" " sky"). `markers` are tokens kept whole (a family's `<think>` or
 * `<|channel|>`, which a scripted model adds to its vocabulary); the vocabulary's own control and
 * user-defined tokens (`<|im_end|>`, `<tool_call>`…) are kept whole too. For example
 * `scriptTokens("\n<think>The sky</think>Blue.<|im_end|>", ["<think>", "</think>"])` is
 * `["Ċ", "<think>", "The", "Ġs", "k", "y", "</think>", "B", "l", "u", "e", ".", "<|im_end|>"]`: the
 * vocabulary's 200 merges know common English words only. The script's first token is its source,
 * the prompt's last: scriptText(tokens.slice(1)) is the reply a model writes.
 */
export function scriptTokens(text: string, markers: readonly string[] = [], vocabulary: TestVocabulary = testVocabulary()): string[] {
  const atomic = [...new Set([...markers, ...vocabulary.tokens.filter((_, id) => vocabulary.tokenTypes[id] !== TokenType.normal)])]
    .filter((marker) => marker.length > 0)
    // As llama.cpp: the longest marker first where two start at the same place.
    .sort((a, b) => b.length - a.length);
  const ranks = new Map(vocabulary.merges.map((merge, rank) => [merge, rank]));
  const tokens: string[] = [];
  let plain = "";
  const flush = () => {
    for (const word of plain.match(PRE_TOKENIZER) ?? []) tokens.push(...bytePairEncode(byteEncode(word), ranks));
    plain = "";
  };
  for (let at = 0; at < text.length;) {
    const marker = atomic.find((candidate) => text.startsWith(candidate, at));
    if (marker === undefined) {
      plain += text[at];
      at++;
    } else {
      flush();
      tokens.push(marker);
      at += marker.length;
    }
  }
  flush();
  return tokens;
}

const BYTES = new Map(Array.from({ length: 256 }, (_, byte) => [byteSymbol(byte), byte]));

/**
 * The text of script tokens as a client reads it: byte-level tokens decoded from their byte
 * symbols, markers as they are (the inverse of scriptTokens).
 */
export function scriptText(tokens: readonly string[], vocabulary: TestVocabulary = testVocabulary()): string {
  const bytes: number[] = [];
  for (const token of tokens) {
    const id = vocabulary.tokens.indexOf(token);
    if (id >= 0 && vocabulary.tokenTypes[id] === TokenType.normal) bytes.push(...[...token].map((symbol) => BYTES.get(symbol) ?? 0));
    else bytes.push(...Buffer.from(token, "utf8"));
  }
  return Buffer.from(bytes).toString("utf8");
}

/** BPE on one word: merge the adjacent pair of highest priority (lowest rank, leftmost) until none applies. */
function bytePairEncode(symbols: string[], ranks: ReadonlyMap<string, number>): string[] {
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const rank = ranks.get(`${symbols[i]} ${symbols[i + 1]}`);
      if (rank !== undefined && rank < bestRank) {
        best = i;
        bestRank = rank;
      }
    }
    if (best < 0) return symbols;
    symbols.splice(best, 2, symbols[best]! + symbols[best + 1]!);
  }
}
