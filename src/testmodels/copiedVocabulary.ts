// A real model family's vocabulary for the test models: the `tokenizer.*` keys of a GGUF file
// (llama.cpp's models/ggml-vocab-*.gguf: Llama 3, Qwen2, Phi-3, ...) copied as they are, so the
// server and llama.cpp tokenize prompts with the family's own tokens, merges, scores and rules.
import type { GgufValue } from "../gguf/GgufWriter.js";
import { readGgufValues } from "../gguf/GgufReader.js";
import { TokenType } from "./testVocabulary.js";

export interface CopiedVocabulary {
  /** Every `tokenizer.*` key of the file, in the file's order, with its GGUF type. */
  readonly keys: ReadonlyMap<string, GgufValue>;
  /** The number of tokens (rows of the embedding and output matrices). */
  readonly size: number;
  /** `tokenizer.ggml.token_type` (all normal where the file has none). */
  readonly tokenTypes: readonly number[];
  /**
   * The file's `general.name`, which goes with the vocabulary: llama.cpp sets some token attributes
   * by the model's name (llama-vocab.cpp: in a model named Phi-3 / Phi3 the special tokens strip the
   * whitespace after them, so `<|user|>\nHi` is `<|user|>`, `▁Hi`).
   */
  readonly name: string | undefined;
}

const TOKENS = "tokenizer.ggml.tokens";
const TOKEN_TYPES = "tokenizer.ggml.token_type";
const NAME = "general.name";

/** Reads the vocabulary of the GGUF file at `file` (any architecture; a vocabulary-only file is enough). */
export async function copiedVocabulary(file: string): Promise<CopiedVocabulary> {
  const keys = await readGgufValues(file, (key) => key.startsWith("tokenizer.") || key === NAME);
  const name = keys.get(NAME);
  keys.delete(NAME);
  const tokens = keys.get(TOKENS);
  if (tokens?.type !== "array" || tokens.itemType !== "string") throw new Error(`${file} has no ${TOKENS} array of strings`);
  const size = tokens.values.length;
  const types = keys.get(TOKEN_TYPES);
  const tokenTypes = types?.type === "array" && types.itemType === "int32" ? types.values : Array<number>(size).fill(TokenType.normal);
  if (tokenTypes.length !== size) throw new Error(`${file} has ${size} tokens but ${tokenTypes.length} token types`);
  return { keys, size, tokenTypes, name: name?.type === "string" ? name.value : undefined };
}

/** The keys of a file's chat templates: the default, named ones (`tokenizer.chat_template.tool_use`) and their list. */
export function isChatTemplateKey(key: string): boolean {
  return key === "tokenizer.chat_template" || key.startsWith("tokenizer.chat_template.") || key === "tokenizer.chat_templates";
}
