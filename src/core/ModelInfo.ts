import type { KvCacheStatus } from "./KvCacheType.js";

/**
 * What a model can be used for: decoder models chat and embed (mean pooling); encoders only embed;
 * models whose file declares rank pooling (cross-encoders with a classification head) only rerank.
 */
export type ModelCapability = "chat" | "embeddings" | "rerank";

/** What the registry knows of an installed model without loading its weights. */
export interface ModelInfo {
  /** The name callers use. */
  id: string;
  /** Other names that resolve to the same file. */
  aliases: string[];
  path: string;
  sizeBytes: number;
  /** File modification time, seconds since the epoch (the `created` field of model listings). */
  created: number;
  architecture: string;
  /** Context length the model was trained with, when the file says. */
  contextLength?: number;
  embeddingLength?: number;
  parameterCount?: number;
  hasChatTemplate: boolean;
  /** The weights' quantization as llama.cpp names its file types, e.g. "Q4_K_M", "F16". */
  quantization?: string;
  /** The vocabulary has fill-in-the-middle tokens (prefix, suffix, middle), so it can insert text. */
  fillInTheMiddle: boolean;
  capabilities: ModelCapability[];
  /**
   * What a chat model's template gives it (chat models only): `tools`, the tools offered are shown
   * to it (its template or tool_use variant lists them, or, without a template, the fallback format
   * describes them); `thinking`, its template has a thought section split from replies.
   */
  templateFeatures?: ReadonlyArray<"tools" | "thinking">;
  /**
   * The vision projector paired with a chat model (an mmproj GGUF: named in models.json, or found
   * beside the model by name): the model reads images through it.
   */
  projector?: string;
  /** A model served upstream whose servers read images (its declaration says so), with no projector here. */
  upstreamVision?: boolean;
  /**
   * The LoRA adapters declared over this model in models.json, in their order (a request's `lora`
   * ids index them), each served as a model of its own: `base+name`.
   */
  adapters?: ModelAdapter[];
  /** The model that drafts for it (models.json `draft`), by name: speculative decoding with --speculation draft. */
  draft?: string;
  /** Set on a `base+name` model: the adapters it applies (ids into `adapters`), unless a request names its own. */
  appliedAdapters?: Array<{ id: number; scale: number }>;
  /** The pooling the file declares for embeddings (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank). */
  poolingType?: number;
}

/** A LoRA adapter (a GGUF of general.type "adapter") declared over its base model. */
export interface ModelAdapter {
  /** Its name after the base's: `base+name`. */
  name: string;
  path: string;
  /** The scale its own model name applies it at (models.json; 1 by default). */
  scale: number;
  /** Why it cannot apply (an unreadable file, another architecture), said to a request that asks for it. */
  problem?: string;
}

/** Whether a model's chat reads images: through its projector, or on the upstream that serves it. */
export function readsImages(model: ModelInfo): boolean {
  return model.capabilities.includes("chat") && (model.projector !== undefined || model.upstreamVision === true);
}

export interface LoadedModelStatus {
  id: string;
  /** Requests decoding now. */
  active: number;
  /** Requests waiting for a free sequence. */
  queued: number;
  /** When the model will be unloaded if it stays idle (ms since the epoch), or null while in use. */
  expiresAt: number | null;
  /** The idle time after which it unloads, in ms (Infinity: never). */
  keepAliveMs: number;
  /** Context per sequence, in tokens. */
  contextSize: number;
  /** How long loading it took, in ms (weights and context). */
  loadMs: number;
  /** The chat context's KV cache types and memory (models that chat; not those that only embed or rerank). */
  kvCache?: KvCacheStatus;
}

/** What a model's file says about it, beyond the registry's summary. */
export interface ModelDescription {
  info: ModelInfo;
  /** GGUF metadata by full key (`general.architecture`, `llama.context_length`, …); vocabulary arrays are left out. */
  metadata: Record<string, unknown>;
  /** The Jinja chat template from the file, when it has one. */
  chatTemplate?: string;
  /** The chat template has a thought section (`<think>…</think>` and the like): replies may carry a thought. */
  thinks: boolean;
  /**
   * The model is shown the tools it may call: its template (or its `tool_use` variant) prints them,
   * or, for a file without a template, the fallback format describes them.
   */
  tools: boolean;
}

export interface EngineStatus {
  ready: boolean;
  /** Which llama.cpp binary is in use, e.g. "prebuilt" or "native". */
  backend: string | null;
  loaded: LoadedModelStatus[];
  counters: EngineCounters;
  /** Host memory the prompt cache beyond the slots holds now, in bytes (--cache-ram). */
  promptCacheBytes: number;
}

/** Counters at zero: an engine's at its start. */
export function zeroCounters(): EngineCounters {
  return {
    promptEvaluations: 0,
    promptTokensEvaluated: 0,
    promptCopies: 0,
    promptTokensRestored: 0,
    draftTokens: 0,
    draftTokensAccepted: 0,
  };
}

/** Totals since the engine started, over all models: what work the prompts took. */
export interface EngineCounters {
  /** Prompts read into a sequence by decoding them (a prompt shared by n choices counts once). */
  promptEvaluations: number;
  /** Prompt tokens decoded, cached ones excluded; each choice decodes the prompt's last token itself. */
  promptTokensEvaluated: number;
  /** Prompt caches copied from one sequence to another (n - 1 per request with n choices). */
  promptCopies: number;
  /** Prompt tokens restored from the prompt cache in host memory (--cache-ram) instead of decoded. */
  promptTokensRestored: number;
  /** Speculative decoding (--speculation): tokens drafted, and those the model accepted. */
  draftTokens: number;
  draftTokensAccepted: number;
}
