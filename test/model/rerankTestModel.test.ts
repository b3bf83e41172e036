import { stat } from "node:fs/promises";
import type { Llama, LlamaModel, LlamaRankingContext, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { presets } from "../../src/testmodels/presets.js";
import type { BertPreset } from "../../src/testmodels/presets.js";
import { wordPieceVocabulary } from "../../src/testmodels/wordPieceVocabulary.js";
import { describeDeterministicGeneration } from "../support/describeDeterministicGeneration.js";
import {
  loadWithLogs,
  readWeights,
  referenceForward,
  referenceRelevance,
  RERANK_DOCUMENTS,
  RERANK_QUERY,
} from "../support/referenceBert.js";
import { testModelPath } from "../support/testModels.js";

const preset: BertPreset = (() => {
  const rerankTiny = presets["rerank-tiny"];
  if (rerankTiny.kind !== "bert") throw new Error("rerank-tiny should be a bert preset");
  return rerankTiny;
})();

const [QUERY, DOCUMENTS] = [RERANK_QUERY, RERANK_DOCUMENTS];

describe("rerank-tiny test model", () => {
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaRankingContext;
  let path: string;
  let logs: string[];

  beforeAll(async () => {
    path = await testModelPath("rerank-tiny");
    ({ llama, model, logs } = await loadWithLogs(path));
    context = await model.createRankingContext({ contextSize: 512, batchSize: 512, threads: 1 });
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
  });

  it("is a bert model with rank pooling and a classification head", () => {
    expect(model.fileInfo.metadata.general.architecture).toBe("bert");
    expect(model.fileInfo.architectureMetadata.pooling_type).toBe(4);
    const tensors = (model.fileInfo.tensorInfo ?? []).map((tensor) => tensor.name);
    expect(tensors).toEqual(expect.arrayContaining(["cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"]));
    // What llama.cpp itself read from the file.
    const log = logs.join("\n");
    expect(log).toMatch(/^print_info: pooling type += 4$/m);
    expect(log).toMatch(/^print_info: causal attn += 0$/m);
  });

  it("scores each document as the reference forward pass and classification head do, over [CLS] query [SEP] [SEP] document [SEP]", async () => {
    const weights = await readWeights(path, model);
    const vocabulary = wordPieceVocabulary();
    const tokenize = (text: string) => model.tokenize(text, false, "trimLeadingSpace");
    for (const document of DOCUMENTS) {
      // node-llama-cpp's layout for a model without a rerank template: BOS, query, EOS, SEP,
      // document, EOS; here BOS is [CLS] and EOS and SEP are both [SEP].
      const tokens = [
        vocabulary.clsId,
        ...tokenize(QUERY),
        vocabulary.sepId,
        vocabulary.sepId,
        ...tokenize(document),
        vocabulary.sepId,
      ] as Token[];
      expect(context.calculateInputLength(QUERY, document)).toBe(tokens.length);
      const expected = referenceRelevance(weights, referenceForward(preset, weights, tokens));
      const actual = await context.rank(QUERY, document);
      // F16 weights, and llama.cpp rounds activations to F16 for F16 matrix products.
      expect(actual, document).toBeCloseTo(expected, 2);
    }
  });

  it("gives the documents clearly different scores, so the ordering is meaningful", async () => {
    const scores = await context.rankAll(QUERY, DOCUMENTS);
    const sorted = [...scores].sort((a, b) => a - b);
    for (let i = 1; i < sorted.length; i++) expect((sorted[i] ?? 0) - (sorted[i - 1] ?? 0)).toBeGreaterThan(0.005);
    expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(0.2);
  });

  it("is at most 2 MB", async () => {
    expect((await stat(path)).size).toBeLessThanOrEqual(2 * 1024 * 1024);
  });

  describeDeterministicGeneration("rerank-tiny");
});
