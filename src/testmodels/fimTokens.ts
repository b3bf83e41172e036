// Fill-in-the-middle tokens for the fim-tiny test model, spelled and declared as Qwen2.5-Coder's:
// control tokens, and the GGUF keys llama.cpp reads to find them (tokenizer.ggml.fim_pre_token_id,
// fim_suf_token_id, fim_mid_token_id; llama_vocab_fim_pre/suf/mid). Control tokens get zero output
// rows (llamaModelWriter), so the model never writes them: they only shape the prompt.
import { TokenType, type TestVocabulary } from "./testVocabulary.js";

export const FIM_PREFIX = "<|fim_prefix|>";
export const FIM_SUFFIX = "<|fim_suffix|>";
export const FIM_MIDDLE = "<|fim_middle|>";

/** The vocabulary with the three FIM tokens appended, and their ids under the GGUF key names. */
export function withFimTokens(vocabulary: TestVocabulary): {
  vocabulary: TestVocabulary;
  ids: { fim_pre: number; fim_suf: number; fim_mid: number };
} {
  const first = vocabulary.tokens.length;
  return {
    vocabulary: {
      ...vocabulary,
      tokens: [...vocabulary.tokens, FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE],
      tokenTypes: [...vocabulary.tokenTypes, TokenType.control, TokenType.control, TokenType.control],
    },
    ids: { fim_pre: first, fim_suf: first + 1, fim_mid: first + 2 },
  };
}
