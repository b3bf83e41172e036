import type { LlamaModel, Token } from "node-llama-cpp";
import { BatchDecoder, DecoderSequence } from "../../src/engine/BatchDecoder.js";
import {
  createNativeSampler,
  nativeContextOf,
  sequenceIdOf,
  type NativeSamplerConfig,
  type NativeSteps,
} from "../../src/engine/llamaInternals.js";

/** Temperature 0: the same tokens every run. */
export const GREEDY: NativeSamplerConfig = { temperature: 0, topK: 40, topP: 0.95, minP: 0, seed: 42 };

export interface NativeGeneration {
  limit: number;
  /** --stream-hold, in ms. */
  holdMs: number;
  contextSize: number;
  sampling: NativeSamplerConfig;
  /** Sees the number of tokens so far as each comes. */
  onToken?: (count: number) => void;
}

/**
 * Generates `limit` tokens from "Tell me about the sea." through a BatchDecoder on a context of its
 * own, with `native` steps (modelhost's native loop, possibly wrapped to count its calls) or
 * without (node-llama-cpp's own calls).
 */
export async function generateNatively(model: LlamaModel, native: NativeSteps | undefined, options: NativeGeneration): Promise<Token[]> {
  const context = await model.createContext({ sequences: 1, contextSize: options.contextSize });
  const sampler = createNativeSampler(model, options.sampling);
  try {
    const decoder = new BatchDecoder(nativeContextOf(context), { batchSize: 512, threads: 2, holdMs: options.holdMs, native });
    const owner = context.getSequence();
    const tokens: Token[] = [];
    const setup = { sampler, isLast: () => false, limit: options.limit };
    for await (const { token } of decoder.generate(
      new DecoderSequence(sequenceIdOf(owner), owner),
      model.tokenize("Tell me about the sea."),
      setup,
    )) {
      tokens.push(token);
      options.onToken?.(tokens.length);
    }
    return tokens;
  } finally {
    sampler.dispose();
    await context.dispose();
  }
}
