import type { Llama, LlamaContext, LlamaContextSequence, LlamaGrammarEvaluationState, LlamaModel, Token } from "node-llama-cpp";
import {
  DECODE_AND_SAMPLE,
  GENERATE,
  MULTIMODAL_EVALUATE,
  MULTIMODAL_FREE,
  MULTIMODAL_LOAD,
  MULTIMODAL_TOKENIZE,
  TRIM_MEMORY,
} from "./native/addonPatch.js";

/**
 * node-llama-cpp's native objects, which the batch decoder drives directly (see BatchDecoder for
 * why). They are internal to node-llama-cpp: `LlamaContext._ctx` (its AddonContext),
 * `LlamaContextSequence._sequenceId`, `LlamaModel._model` and `_llama._bindings.AddonSampler`, and
 * `LlamaGrammarEvaluationState._state`.
 * package.json pins node-llama-cpp to the exact version these were read from (3.22.1,
 * llama/addon/AddonContext.cpp and AddonSampler.cpp), and `nativeContextOf` checks their shape
 * when a model loads, so another version fails there with a clear message rather than mid-request.
 */

/** The addon's context: one batch at a time, decoded on the libuv pool; sampling reads its logits. */
export interface NativeContext {
  /** Allocates the batch for `size` tokens (at most the context's batch size). */
  initBatch(size: number): void;
  /** Adds tokens at positions `firstPosition`…; those at `logitIndexes` (indexes into `tokens`) get logits. Returns their indexes in the batch. */
  addToBatch(sequenceId: number, firstPosition: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  /**
   * Samples from the logits at `batchIndex` and accepts the token into the sampler (penalty
   * history, grammar). -1: nothing could be sampled. With `metadata`, resolves to
   * `[token, probabilities?, confidence?]`, probabilities flattened as [token, p, token, p, …],
   * most likely first.
   */
  sampleToken(batchIndex: number, sampler: NativeSampler): Promise<number>;
  sampleToken(
    batchIndex: number,
    sampler: NativeSampler,
    probabilities: boolean,
    confidence: boolean,
  ): Promise<[number, number[] | undefined, number | undefined]>;
  /** llama_memory_seq_rm: false when the memory cannot remove part of a sequence (recurrent models). */
  removeTokenCellsFromSequence(sequenceId: number, start: number, end: number): boolean;
  /** llama_memory_seq_cp of all of `source` into `target`; resolves to the last position copied. */
  copySequenceStateFromOtherSequence(target: number, source: number): Promise<number>;
  /**
   * Writes `checkpoint`'s state into the sequence (llama_state_seq_set_data_ext, which first
   * empties it), then drops its positions after `maxPosition`; resolves to whether it now ends at
   * exactly `maxPosition`.
   */
  restoreCheckpoint(checkpoint: NativeCheckpoint, maxPosition: number, sequenceId: number): Promise<boolean>;
  setThreads(threads: number): void;
  /** llama_set_adapters_lora: the LoRA adapters (AddonModelLora) the context's decodes apply, at these scales. */
  setLoras(adapters: readonly unknown[], scales: readonly number[]): void;
}

/**
 * node-llama-cpp's AddonContextSequenceCheckpoint: one sequence's memory copied into host memory
 * (llama_state_seq_get_data_ext, with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY, which a plain KV cache
 * ignores: it writes all of the sequence's cells; see PromptCache for the models it is used on).
 */
export interface NativeCheckpoint {
  /** Copies the sequence's state in; rejects if it cannot. */
  init(context: NativeContext, sequenceId: number): Promise<void>;
  dispose(): void;
  /** Bytes held. */
  readonly size: number;
  readonly minPos: number;
  readonly maxPos: number;
}

/** The addon's sampler chain; its config is read by `applyConfig` (AddonSampler::ApplyConfig). */
export interface NativeSampler {
  applyConfig(config: NativeSamplerConfig): void;
  dispose(): void;
}

export interface NativeSamplerConfig {
  temperature: number;
  minP: number;
  topK: number;
  topP: number;
  seed: number;
  repeatPenalty?: number;
  repeatPenaltyMaxTokens?: number;
  repeatPenaltyTokens?: Uint32Array;
  repeatPenaltyPresencePenalty?: number;
  repeatPenaltyFrequencyPenalty?: number;
  tokenBiasKeys?: Uint32Array;
  tokenBiasValues?: Float32Array;
  grammarEvaluationState?: unknown;
}

interface ContextInternals {
  _ctx?: NativeContext & {
    /**
     * The memory llama.cpp allocated for the context (AddonContext::GetMemoryBreakdown, from
     * llama_memory_breakdown): its KV cache plus its compute buffers, in host and GPU memory.
     */
    getMemoryBreakdown?: () => { cpuRam: number; gpuVram: number };
  };
}
interface SequenceInternals {
  _sequenceId?: number;
}
interface LlamaInternals {
  _bindings?: {
    AddonSampler?: new (model: unknown) => NativeSampler;
    AddonContextSequenceCheckpoint?: new () => NativeCheckpoint;
  } & Record<string, unknown>;
}
interface ModelInternals {
  _model?: unknown;
  _llama?: LlamaInternals;
}
interface GrammarStateInternals {
  _state?: unknown;
}

const contextMethods = [
  "initBatch",
  "addToBatch",
  "decodeBatch",
  "sampleToken",
  "removeTokenCellsFromSequence",
  "copySequenceStateFromOtherSequence",
  "restoreCheckpoint",
  "setThreads",
  "setLoras",
] as const;

function mismatch(what: string): Error {
  return new Error(`node-llama-cpp's internal ${what} is not what modelhost expects: install the version package.json pins (npm ci).`);
}

export function nativeContextOf(context: LlamaContext): NativeContext {
  const native = (context as unknown as ContextInternals)._ctx;
  for (const method of contextMethods) if (typeof native?.[method] !== "function") throw mismatch(`AddonContext.${method}`);
  return native!;
}

/** The bytes llama.cpp allocated for the context: KV cache and compute buffers, host and GPU. */
export function contextMemoryBytes(context: LlamaContext): number {
  const native = (context as unknown as ContextInternals)._ctx;
  if (typeof native?.getMemoryBreakdown !== "function") throw mismatch("AddonContext.getMemoryBreakdown");
  const { cpuRam, gpuVram } = native.getMemoryBreakdown();
  return cpuRam + gpuVram;
}

/**
 * modelhost's native decode-and-sample (native/decodeAndSample.cpp), present in binaries built by
 * `modelhost engine build`: decodes the context's batch, then samples each batch index with its
 * sampler, in one task; resolves to the tokens (-1 where none could be sampled).
 */
export type DecodeAndSample = (context: NativeContext, batchIndexes: Int32Array, samplers: NativeSampler[]) => Promise<Int32Array>;

/**
 * modelhost's native generation loop (native/decodeAndSample.cpp), in the same binaries: the same
 * first step, then each sampled token is decoded as its sequence's next input (`positions[i]`,
 * `positions[i] + 1`, …) and sampled again, without a round trip through the event loop. The
 * steps' tokens reach `onSteps` in order, each call with every step decoded since the last (one
 * token per batch index a step). It stops before a step once `control[0]` is non-zero, after
 * `maxSteps` more steps, after a token that is -1, an end of generation or in `endTokens`, and after
 * its time slice (other models' turn on the decode thread). Resolves to the steps taken, all seen by then.
 */
export type NativeGenerate = (
  context: NativeContext,
  batchIndexes: Int32Array,
  samplers: NativeSampler[],
  sequenceIds: Int32Array,
  positions: Int32Array,
  endTokens: Int32Array,
  maxSteps: number,
  control: Int32Array,
  onSteps: (tokens: Int32Array) => void,
) => Promise<number>;

/** modelhost's native steps, where the loaded binary was built with them (`modelhost engine build`). */
export interface NativeSteps {
  decodeAndSample: DecodeAndSample;
  generate: NativeGenerate;
}

export function nativeSteps(llama: Llama): NativeSteps | undefined {
  const bindings = (llama as unknown as LlamaInternals)._bindings;
  const decodeAndSample = bindings?.[DECODE_AND_SAMPLE];
  const generate = bindings?.[GENERATE];
  if (typeof decodeAndSample !== "function" || typeof generate !== "function") return undefined;
  return { decodeAndSample: decodeAndSample as DecodeAndSample, generate: generate as NativeGenerate };
}

/** A loaded vision projector, or a prompt's chunks, as the native build hands them out (opaque). */
export type NativeHandle = { readonly __native: unique symbol };

/** One part of a prompt split at its images: a text part's tokens, or an image chunk. */
export type NativeMultimodalPart = Int32Array | { id: string; tokens: number; positions: number };

/**
 * modelhost's binding of llama.cpp's tools/mtmd (native/decodeAndSample.cpp), in binaries built by
 * `modelhost engine build`: a vision model's projector loaded for its model, prompts split at an
 * image marker into text tokens and image chunks (the images decoded by stb_image, as
 * llama-server's are), and an image chunk evaluated into a sequence on the decode thread.
 */
export interface NativeMultimodal {
  load(model: unknown, projectorPath: string, threads: number, marker: string): Promise<NativeHandle>;
  tokenize(projector: NativeHandle, text: string, images: Uint8Array[]): Promise<{ chunks: NativeHandle; parts: NativeMultimodalPart[] }>;
  evaluate(
    context: NativeContext,
    projector: NativeHandle,
    chunks: NativeHandle,
    index: number,
    sequenceId: number,
    position: number,
    batchSize: number,
  ): Promise<number>;
  free(projector: NativeHandle): Promise<void>;
}

export function nativeMultimodal(llama: Llama): NativeMultimodal | undefined {
  const bindings = (llama as unknown as LlamaInternals)._bindings;
  const [load, tokenize, evaluate, free] = [MULTIMODAL_LOAD, MULTIMODAL_TOKENIZE, MULTIMODAL_EVALUATE, MULTIMODAL_FREE].map(
    (name) => bindings?.[name],
  );
  if (typeof load !== "function" || typeof tokenize !== "function" || typeof evaluate !== "function" || typeof free !== "function")
    return undefined;
  return { load, tokenize, evaluate, free } as NativeMultimodal;
}

/** node-llama-cpp's AddonModel of a model (the native object mtmd loads a projector for). */
export function nativeModelOf(model: LlamaModel): unknown {
  const native = (model as unknown as ModelInternals)._model;
  if (native === undefined) throw mismatch("LlamaModel._model");
  return native;
}

/**
 * Gives the free memory of the process's malloc arenas back to the system, with modelhost's native
 * build (modelhostTrimMemory in native/decodeAndSample.cpp); returns whether it could. After a
 * model loads or unloads: what it freed on a libuv thread's arena otherwise stays resident.
 */
export function trimMemory(llama: Llama): boolean {
  const trim = (llama as unknown as LlamaInternals)._bindings?.[TRIM_MEMORY];
  return typeof trim === "function" ? (trim as () => boolean)() : false;
}

/** The id llama.cpp knows the sequence by (its seq_id in batches and memory calls). */
export function sequenceIdOf(sequence: LlamaContextSequence): number {
  const id = (sequence as unknown as SequenceInternals)._sequenceId;
  if (typeof id !== "number") throw mismatch("LlamaContextSequence._sequenceId");
  return id;
}

/** A new sampler chain for `model`, configured once: it keeps its penalty history and grammar state as it samples. */
export function createNativeSampler(model: LlamaModel, config: NativeSamplerConfig): NativeSampler {
  const internals = model as unknown as ModelInternals;
  const Sampler = internals._llama?._bindings?.AddonSampler;
  if (typeof Sampler !== "function" || internals._model === undefined) throw mismatch("AddonSampler");
  const sampler = new Sampler(internals._model);
  try {
    sampler.applyConfig(config);
  } catch (error) {
    sampler.dispose();
    throw error;
  }
  return sampler;
}

interface LoraModelInternals {
  _getOrLoadLora?: (filePath: string) => Promise<unknown>;
}

/**
 * The model's LoRA adapter loaded from `file` (llama_adapter_lora_init, on a libuv thread), once
 * per model and file: node-llama-cpp keeps it with the model and frees it with it. Rejects with
 * llama.cpp's reason when the file is not an adapter of this model (a matrix of another shape: "maybe
 * wrong base model").
 */
export function loadLoraAdapter(model: LlamaModel, file: string): Promise<unknown> {
  const load = (model as unknown as LoraModelInternals)._getOrLoadLora;
  if (typeof load !== "function") throw mismatch("LlamaModel._getOrLoadLora");
  return load.call(model, file);
}

/** A new, empty checkpoint (see NativeCheckpoint) for `llama`'s contexts. */
export function createNativeCheckpoint(llama: Llama): NativeCheckpoint {
  const Checkpoint = (llama as unknown as LlamaInternals)._bindings?.AddonContextSequenceCheckpoint;
  if (typeof Checkpoint !== "function") throw mismatch("AddonContextSequenceCheckpoint");
  return new Checkpoint();
}

export function nativeGrammarState(state: LlamaGrammarEvaluationState): unknown {
  const native = (state as unknown as GrammarStateInternals)._state;
  if (native === undefined) throw mismatch("LlamaGrammarEvaluationState._state");
  return native;
}

/** A sampleToken result with metadata, as node-llama-cpp revives it: probabilities most likely first. */
export function probabilityMap(flat: readonly number[] | undefined): Map<Token, number> | undefined {
  if (!flat) return undefined;
  const map = new Map<Token, number>();
  for (let i = 1; i < flat.length; i += 2) map.set(flat[i - 1] as Token, flat[i]!);
  return map;
}
