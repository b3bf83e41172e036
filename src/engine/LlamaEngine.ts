import type { Llama } from "node-llama-cpp";
import type { ChatStream } from "../core/ChatEvent.js";
import type { ChatRequest } from "../core/ChatRequest.js";
import type { EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { Engine, LoadOptions, PromptPreview, RequestOptions } from "../core/Engine.js";
import {
  zeroCounters,
  type EngineCounters,
  type EngineStatus,
  type ModelCapability,
  type ModelDescription,
  type ModelInfo,
} from "../core/ModelInfo.js";
import type { RerankRequest, RerankResult } from "../core/RerankRequest.js";
import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "../core/TokenizeRequest.js";
import { checkRequestSchemas } from "../core/checkRequestSchemas.js";
import { ServerError } from "../core/ServerError.js";
import { FileDigests } from "./FileDigests.js";
import { LoadedModel, type ModelRuntimeOptions } from "./LoadedModel.js";
import { adaptersOf } from "./LoraAdapters.js";
import { PromptCache } from "./PromptCache.js";
import type { ModelRegistry } from "./ModelRegistry.js";

export interface EngineLogger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface LlamaEngineOptions extends Omit<ModelRuntimeOptions, "counters" | "promptCache"> {
  /** Host memory for the prompt cache beyond the slots, in MiB (--cache-ram); 0: none. */
  cacheRamMiB: number;
  maxLoadedModels: number;
  /** Idle time before a model is unloaded, in ms; Infinity keeps it forever, 0 unloads at once. */
  keepAliveMs: number;
  /** Which binary is in use, for status reports. */
  backend: string;
  logger: EngineLogger;
}

interface Resident {
  loading: Promise<LoadedModel>;
  model?: LoadedModel;
  lastUsed: number;
  timer?: NodeJS.Timeout;
  /** Set by the last request that asked for one; otherwise the server's keepAliveMs applies. */
  keepAliveMs?: number;
  /** How long the load took, once it has. */
  loadMs?: number;
}

/**
 * The engine: resolves model names through the registry, loads models on demand (at most
 * `maxLoadedModels` at once, least recently used idle one out first), unloads idle ones after the
 * keep-alive, and runs chats on them.
 */
export class LlamaEngine implements Engine {
  readonly #llama: Llama;
  readonly #registry: ModelRegistry;
  readonly #options: LlamaEngineOptions;
  /** Keyed by file path: aliases of one file share one loaded model. */
  readonly #resident = new Map<string, Resident>();
  readonly #roomWaiters = new Set<() => void>();
  readonly #digests = new FileDigests();
  readonly #counters: EngineCounters = zeroCounters();
  readonly #promptCache: PromptCache | undefined;
  #closed = false;

  constructor(llama: Llama, registry: ModelRegistry, options: LlamaEngineOptions) {
    this.#llama = llama;
    this.#registry = registry;
    this.#options = options;
    this.#promptCache = options.cacheRamMiB > 0 ? new PromptCache(llama, options.cacheRamMiB, this.#counters) : undefined;
  }

  listModels(): Promise<ModelInfo[]> {
    return this.#registry.list();
  }

  findModel(name: string): Promise<ModelInfo | undefined> {
    return this.#registry.find(name);
  }

  async chat(request: ChatRequest, options: RequestOptions): Promise<ChatStream> {
    const [stream] = await this.chatChoices({ ...request, n: 1 }, options);
    return stream!;
  }

  async chatChoices(request: ChatRequest, options: RequestOptions): Promise<ChatStream[]> {
    checkRequestSchemas(request);
    const info = await this.#find(request.model, "chat");
    const adapters = adaptersOf(info, request.lora);
    // Pinned until the streams hold their sequences (then they keep the model busy themselves).
    return this.#using(info, options, (model, loadMs) => model.chatChoices(request, options, loadMs, adapters));
  }

  async renderPrompt(request: ChatRequest, options: RequestOptions): Promise<PromptPreview> {
    checkRequestSchemas(request);
    const info = await this.#find(request.model, "chat");
    return this.#using(info, options, (model) => model.renderPrompt(request, options));
  }

  async embed(request: EmbedRequest, options: RequestOptions): Promise<EmbedResult> {
    const info = await this.#find(request.model, "embeddings");
    return this.#using(info, options, async (model, loadMs) => ({ ...(await model.embed(request, options)), loadMs }));
  }

  async rerank(request: RerankRequest, options: RequestOptions): Promise<RerankResult> {
    const info = await this.#find(request.model, "rerank");
    return this.#using(info, options, async (model, loadMs) => ({ ...(await model.rerank(request, options)), loadMs }));
  }

  async tokenize(request: TokenizeRequest, options: RequestOptions): Promise<TokenizeResult> {
    return this.#using(await this.#find(request.model), options, (model) => model.tokenize(request, options));
  }

  async detokenize(request: DetokenizeRequest, options: RequestOptions): Promise<DetokenizeResult> {
    return this.#using(await this.#find(request.model), options, (model) => model.detokenize(request, options));
  }

  async load(name: string, options: LoadOptions): Promise<{ model: ModelInfo; loadMs: number }> {
    const info = await this.#find(name);
    // Unpinning with nothing else running starts the idle timer (or unloads, with keep-alive 0).
    const loadMs = await this.#using(info, options, async (_model, ms) => ms);
    return { model: info, loadMs };
  }

  /**
   * Runs `work` on the loaded model, pinned (see LoadedModel.pin) from the moment it is acquired
   * until `work` settles; unpinning an idle model starts its idle timer.
   */
  async #using<T>(info: ModelInfo, options: LoadOptions, work: (model: LoadedModel, loadMs: number) => Promise<T>): Promise<T> {
    const { model, loadMs, unpin } = await this.#acquire(info, options);
    try {
      return await work(model, loadMs);
    } finally {
      unpin();
    }
  }

  async unload(name: string): Promise<ModelInfo> {
    const info = await this.#find(name);
    const resident = this.#resident.get(info.path);
    if (!resident) return info;
    resident.keepAliveMs = 0;
    const model = await resident.loading.catch(() => undefined);
    // An idle model goes now; a busy one when its last request ends (keep-alive 0).
    if (model?.idle) await this.#unload(info.path);
    return info;
  }

  describeModel(name: string): Promise<ModelDescription | undefined> {
    return this.#registry.describe(name);
  }

  modelDigest(model: ModelInfo): Promise<string> {
    return this.#digests.of(model.path);
  }

  /**
   * The loaded model for a request, loading it if needed, with the time this request waited for
   * a load (0 if it was resident). Applies the request's keep-alive, if it has one.
   */
  async #acquire(
    info: ModelInfo,
    { signal, keepAliveMs }: LoadOptions,
  ): Promise<{ model: LoadedModel; loadMs: number; unpin: () => void }> {
    const started = performance.now();
    const resident = this.#resident.get(info.path)?.model !== undefined;
    for (;;) {
      const model = await this.#acquireModel(info, signal);
      const entry = this.#resident.get(info.path);
      // Unloading may have begun while this request awaited the model; then load it afresh.
      if (model.disposed || model.unloading) continue;
      // Pinned in the same turn as the check, so nothing can unload it from here on.
      const unpin = model.pin();
      // Each request sets it, as with Ollama: one without a keep-alive brings back the default.
      if (entry) entry.keepAliveMs = keepAliveMs;
      return { model, loadMs: resident ? 0 : performance.now() - started, unpin };
    }
  }

  /** The model of that name; with a capability, a model without it is the caller's mistake (400), named with what the model does serve. */
  async #find(name: string, capability?: ModelCapability): Promise<ModelInfo> {
    const info = await this.#registry.find(name);
    if (!info) throw new ServerError("model_not_found", { model: name, param: "model" });
    if (capability !== undefined && !info.capabilities.includes(capability)) {
      throw new ServerError("invalid_request", { param: "model", message: wrongCapabilityMessage(name, capability, info.capabilities) });
    }
    return info;
  }

  status(): EngineStatus {
    const loaded = [...this.#resident.values()].flatMap((resident) =>
      resident.model
        ? [{ ...resident.model.status(), keepAliveMs: resident.keepAliveMs ?? this.#options.keepAliveMs, loadMs: resident.loadMs ?? 0 }]
        : [],
    );
    return {
      ready: !this.#closed,
      backend: this.#options.backend,
      loaded,
      counters: { ...this.#counters },
      promptCacheBytes: this.#promptCache?.bytes ?? 0,
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    const residents = [...this.#resident.keys()];
    await Promise.all(residents.map((path) => this.#unload(path)));
    await this.#llama.dispose();
  }

  async #acquireModel(info: ModelInfo, signal: AbortSignal): Promise<LoadedModel> {
    if (this.#closed) throw new ServerError("engine_unavailable", { message: "The server is shutting down." });
    const existing = this.#resident.get(info.path);
    if (existing) {
      existing.lastUsed = Date.now();
      clearTimeout(existing.timer);
      return existing.loading;
    }
    await this.#makeRoom(signal);
    // Another request may have started loading the same file while this one waited for room.
    const raced = this.#resident.get(info.path);
    if (raced) return raced.loading;

    const loadStarted = performance.now();
    const resident: Resident = { loading: this.#load(info), lastUsed: Date.now() };
    this.#resident.set(info.path, resident);
    try {
      resident.model = await resident.loading;
      resident.loadMs = performance.now() - loadStarted;
      resident.model.onActivity = () => this.#onActivity(info.path);
      this.#onActivity(info.path);
      return resident.model;
    } catch (error) {
      this.#resident.delete(info.path);
      this.#notifyRoom();
      throw error;
    }
  }

  async #load(info: ModelInfo): Promise<LoadedModel> {
    const started = performance.now();
    try {
      const model = await LoadedModel.load(this.#llama, info, {
        ...this.#options,
        counters: this.#counters,
        promptCache: this.#promptCache,
      });
      const draft = await this.#loadDraft(model, info);
      const { kvCache } = model.status();
      this.#options.logger.info(
        {
          model: info.id,
          ms: Math.round(performance.now() - started),
          contextSize: model.contextSize,
          parallel: this.#options.parallel,
          ...(kvCache ? { kvCache } : {}),
          ...(draft ? { draft } : {}),
        },
        "model loaded",
      );
      return model;
    } catch (error) {
      this.#options.logger.error({ model: info.id, err: error }, "model failed to load");
      // The model's own refusals (cache types it cannot take) already say why.
      if (error instanceof ServerError && error.code === "model_load_failed") throw error;
      throw new ServerError("model_load_failed", { model: info.id, cause: error });
    }
  }

  /**
   * Loads the draft model of a model just loaded, with --speculation draft: its models.json
   * `draft`, or else --draft-model. One that cannot draft for it (absent, not a chat model, another
   * vocabulary) is warned of, and the model drafts by n-gram. Resolves to the draft's name when loaded.
   */
  async #loadDraft(model: LoadedModel, info: ModelInfo): Promise<string | undefined> {
    const speculation = this.#options.speculation;
    const name = speculation?.type === "draft" ? (info.draft ?? speculation.draftModel) : undefined;
    if (name === undefined) return undefined;
    const draft = await this.#registry.find(name);
    // A model is not its own draft (--draft-model names one of the models it drafts for).
    if (draft?.path === info.path) return undefined;
    let problem: string;
    if (draft === undefined) problem = `no model is named \`${name}\``;
    else if (!draft.capabilities.includes("chat")) problem = `\`${name}\` is not a chat model`;
    else {
      try {
        await model.loadDraft(this.#llama, draft);
        return name;
      } catch (error) {
        problem = (error as Error).message;
      }
    }
    this.#options.logger.warn({ model: info.id, draft: name }, `The model \`${info.id}\` drafts by n-gram: ${problem}`);
    return undefined;
  }

  /** Waits until fewer than maxLoadedModels are resident, unloading the least recently used idle one. */
  async #makeRoom(signal: AbortSignal): Promise<void> {
    while (this.#resident.size >= this.#options.maxLoadedModels) {
      const idle = [...this.#resident.entries()]
        .filter(([, resident]) => resident.model?.idle)
        .sort(([, a], [, b]) => a.lastUsed - b.lastUsed)[0];
      if (idle) {
        await this.#unload(idle[0]);
        continue;
      }
      await this.#waitForRoom(signal);
    }
  }

  #waitForRoom(signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = () => {
        this.#roomWaiters.delete(wake);
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#roomWaiters.delete(wake);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#roomWaiters.add(wake);
    });
  }

  #notifyRoom(): void {
    for (const wake of [...this.#roomWaiters]) wake();
  }

  #onActivity(path: string): void {
    const resident = this.#resident.get(path);
    const model = resident?.model;
    if (!resident || !model) return;
    clearTimeout(resident.timer);
    resident.lastUsed = Date.now();
    if (!model.idle) {
      model.expiresAt = null;
      return;
    }
    // An idle model may be what a request waiting for room needs unloaded.
    this.#notifyRoom();
    const keepAlive = resident.keepAliveMs ?? this.#options.keepAliveMs;
    if (keepAlive === Infinity) {
      model.expiresAt = null;
      return;
    }
    if (keepAlive <= 0) {
      // At once, not on a timer: whoever asked for it sees the model gone when its reply ends.
      void this.#unload(path);
      return;
    }
    model.expiresAt = Date.now() + keepAlive;
    resident.timer = setTimeout(() => {
      if (model.idle) void this.#unload(path);
    }, keepAlive);
    resident.timer.unref();
  }

  async #unload(path: string): Promise<void> {
    const resident = this.#resident.get(path);
    if (!resident) return;
    this.#resident.delete(path);
    clearTimeout(resident.timer);
    try {
      const model = await resident.loading;
      // Requests that pinned it before it was marked finish first; none can pin it after.
      await model.drainForUnload();
      await model.dispose();
      this.#options.logger.info({ model: model.info.id }, "model unloaded");
    } catch {
      // A model that failed to load has nothing to free.
    }
    this.#notifyRoom();
  }
}

/** What each capability is called in messages, and the endpoint that serves it. */
const CAPABILITY_WORDING: Record<ModelCapability, { noun: string; verb: string; endpoint: string }> = {
  chat: { noun: "a chat model", verb: "generate chat completions", endpoint: "/v1/chat/completions" },
  embeddings: { noun: "an embedding model", verb: "compute embeddings", endpoint: "/v1/embeddings" },
  rerank: { noun: "a reranking model", verb: "rerank documents", endpoint: "/v1/rerank" },
};

/** E.g. "The model `bge-reranker` is a reranking model: it cannot generate chat completions. Use it with /v1/rerank." */
function wrongCapabilityMessage(name: string, wanted: ModelCapability, has: readonly ModelCapability[]): string {
  const serves = has[0];
  const cannot = `it cannot ${CAPABILITY_WORDING[wanted].verb}`;
  if (serves === undefined) return `The model \`${name}\` serves nothing: ${cannot}.`;
  return `The model \`${name}\` is ${CAPABILITY_WORDING[serves].noun}: ${cannot}. Use it with ${has.map((capability) => CAPABILITY_WORDING[capability].endpoint).join(" or ")}.`;
}
