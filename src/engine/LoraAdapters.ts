import path from "node:path";
import type { LlamaModel } from "node-llama-cpp";
import type { AdapterChoice } from "../core/ChatRequest.js";
import type { ModelInfo } from "../core/ModelInfo.js";
import { ServerError } from "../core/ServerError.js";
import type { GgufHeader } from "../gguf/GgufReader.js";
import { checkModelFile } from "../models/checkModelFile.js";
import { NO_ADAPTERS, type AdapterSet } from "./BatchDecoder.js";
import { loadLoraAdapter } from "./llamaInternals.js";

/** An adapter file to apply, at a scale. */
export interface AdapterUse {
  path: string;
  scale: number;
}

/**
 * The adapters a chat request applies: its `lora` field (ids into the model's declared adapters;
 * those not listed are off, as llama-server has it), or else what its model name applies
 * (`base+adapter`), or none. An id the model has no adapter for is the caller's mistake.
 */
export function adaptersOf(info: ModelInfo, lora: readonly AdapterChoice[] | undefined): AdapterUse[] {
  const declared = info.adapters ?? [];
  const chosen = lora ?? info.appliedAdapters ?? [];
  const uses = new Map<number, number>();
  for (const [index, { id, scale }] of chosen.entries()) {
    const adapter = declared[id];
    if (adapter === undefined) {
      throw new ServerError("invalid_request", {
        param: `lora.${index}.id`,
        message:
          declared.length === 0
            ? `The model \`${info.id}\` has no LoRA adapters: declare them over it in models.json ("adapters").`
            : `The model \`${info.id}\` has no LoRA adapter of id ${id}: its ids are 0 to ${declared.length - 1} (${declared.map((each, i) => `${i}: ${each.name}`).join(", ")}).`,
      });
    }
    if (adapter.problem !== undefined && scale !== 0) {
      throw new ServerError("model_load_failed", {
        model: info.id,
        message: `The LoRA adapter ${path.basename(adapter.path)} cannot be applied to \`${info.id}\`: ${adapter.problem}.`,
      });
    }
    uses.set(id, scale);
  }
  return [...uses].flatMap(([id, scale]) => (scale === 0 ? [] : [{ path: declared[id]!.path, scale }]));
}

/**
 * A loaded model's LoRA adapters: each file checked (by the bounded GGUF reader, then its matrices
 * against the model's) and loaded once, on first use, and kept until the model unloads; and the
 * adapter sets requests decode with.
 */
export class LoraAdapters {
  readonly #model: LlamaModel;
  readonly #modelId: string;
  /** The model's tensors by name, with their shapes (ggml order), for checking adapters against. */
  readonly #tensors: ReadonlyMap<string, readonly bigint[]>;
  readonly #loaded = new Map<string, Promise<unknown>>();

  constructor(model: LlamaModel, modelId: string, header: GgufHeader) {
    this.#model = model;
    this.#modelId = modelId;
    this.#tensors = new Map(header.tensors.map((tensor) => [tensor.name, tensor.dims]));
  }

  /** The set of these adapters, each loaded if it was not yet; rejects with why one cannot be. */
  async set(uses: readonly AdapterUse[]): Promise<AdapterSet> {
    if (uses.length === 0) return NO_ADAPTERS;
    const sorted = [...uses].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const adapters = await Promise.all(sorted.map(({ path: file }) => this.#load(file)));
    return {
      key: sorted.map(({ path: file, scale }) => `${file}@${scale}`).join("|"),
      adapters,
      scales: sorted.map(({ scale }) => scale),
    };
  }

  #load(file: string): Promise<unknown> {
    let loading = this.#loaded.get(file);
    if (!loading) {
      loading = this.#check(file).then(() => loadLoraAdapter(this.#model, file));
      this.#loaded.set(file, loading);
      // A failure is said again to the next request, not cached: the file may be replaced meanwhile.
      loading.catch(() => this.#loaded.delete(file));
    }
    return loading.catch((error: unknown) => {
      if (error instanceof ServerError) throw error;
      throw this.#refusal(file, `llama.cpp could not load it: ${(error as Error).message}`, error);
    });
  }

  /**
   * Checks the adapter's header as every model file is checked, then each of its matrix pairs
   * against the model's tensor it adapts, as llama_adapter_lora_init does (which would only log
   * why): an adapter made for another base model is refused here with the first tensor that differs.
   */
  async #check(file: string): Promise<void> {
    let header: GgufHeader;
    try {
      header = await checkModelFile(file);
    } catch (error) {
      throw this.#refusal(file, `it is not a readable GGUF file (${(error as Error).message})`, error);
    }
    if (header.metadata.get("general.type") !== "adapter" || header.metadata.get("adapter.type") !== "lora") {
      throw this.#refusal(file, 'it is not a LoRA adapter (general.type "adapter", adapter.type "lora")');
    }
    const dims = new Map(header.tensors.map((tensor) => [tensor.name, tensor.dims]));
    for (const [name, a] of dims) {
      if (!name.endsWith(".lora_a")) continue;
      const target = name.slice(0, -".lora_a".length);
      const b = dims.get(`${target}.lora_b`);
      const base = this.#tensors.get(target);
      const problem =
        b === undefined
          ? `${name} has no ${target}.lora_b`
          : base === undefined
            ? `it adapts ${target}, which the model does not have`
            : !matches(target, base, a, b)
              ? `its ${target} matrices (${shape(a)} and ${shape(b)}) do not fit the model's (${shape(base)})`
              : undefined;
      if (problem !== undefined) throw this.#refusal(file, `${problem}: it was made for another base model`);
    }
    if (![...dims.keys()].some((name) => name.endsWith(".lora_a"))) throw this.#refusal(file, "it holds no LoRA matrices");
  }

  #refusal(file: string, reason: string, cause?: unknown): ServerError {
    return new ServerError("model_load_failed", {
      model: this.#modelId,
      message: `The LoRA adapter ${path.basename(file)} cannot be applied to \`${this.#modelId}\`: ${reason}.`,
      ...(cause === undefined ? {} : { cause }),
    });
  }
}

/**
 * llama.cpp's rule (llama-adapter.cpp): for a weight of [in, out], A is [in, r] and B is [r, out];
 * the token embedding's are flipped (B is [embedding, r], A [r, vocabulary]).
 */
function matches(target: string, base: readonly bigint[], a: readonly bigint[], b: readonly bigint[]): boolean {
  if (target === "token_embd.weight") return base[0] === b[1] && base[1] === a[1];
  return base[0] === a[0] && base[1] === b[1] && a[1] === b[0];
}

function shape(dims: readonly bigint[]): string {
  return `[${dims.join(", ")}]`;
}
