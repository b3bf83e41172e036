// The pieces /tokenize and /detokenize give (TokenBytes.piece), read from the vocabulary, checked
// against llama.cpp's own detokenization of every token of the generated vocabularies.
import { getLlama } from "node-llama-cpp";
import type { Llama, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TokenBytes } from "../../src/engine/TokenBytes.js";
import { testModelPath, type CachedTestModelPreset } from "../support/testModels.js";

describe("token pieces", () => {
  let llama: Llama;

  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never" });
  });
  afterAll(() => llama?.dispose());

  it.each<[CachedTestModelPreset, string]>([
    ["tiny", "byte-level BPE"],
    ["embed-tiny", "WordPiece"],
  ])("match llama.cpp's text of every token of %s (%s)", async (preset) => {
    const model = await llama.loadModel({ modelPath: await testModelPath(preset), vocabOnly: true });
    try {
      const pieces = new TokenBytes(model);
      const count = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
      // llama.cpp's detokenizer cleans up WordPiece text (clean_spaces): it drops the space before
      // "?", "!", "." and ",", which the piece (llama_token_to_piece, what llama-server gives) keeps.
      const asDetokenized = (piece: string) => (model.vocabularyType === "wpm" ? piece.replace(/^ (?=[?!.,]$)/, "") : piece);
      let partial = 0;
      for (let token = 0 as Token; token < count; token++) {
        const bytes = Buffer.from(pieces.piece(token));
        const text = model.detokenize([token], true);
        // Where llama.cpp's text is U+FFFD the token holds part of a character, and the piece's
        // bytes are what that text lost: read as UTF-8 they give U+FFFD too.
        if (text.includes("\uFFFD")) partial++;
        expect(asDetokenized(bytes.toString("utf8")), `token ${token}`).toBe(text);
      }
      // Byte-level BPE has a token per byte: the 128 bytes above 0x7F are not characters alone.
      expect(partial).toBe(preset === "tiny" ? 128 : 0);
    } finally {
      await model.dispose();
    }
  });
});
