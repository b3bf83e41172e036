import { createHash } from "node:crypto";
import { createParser } from "eventsource-parser";
import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";
import type { ChatRequest } from "../core/ChatRequest.js";
import type { EmbedResult } from "../core/EmbedRequest.js";
import type { AdmissionTicket, Engine, LoadOptions, PromptPreview, RequestOptions } from "../core/Engine.js";
import type { EngineStatus, ModelDescription, ModelInfo } from "../core/ModelInfo.js";
import { nameCandidates } from "../core/modelName.js";
import type { RerankResult } from "../core/RerankRequest.js";
import { ServerError } from "../core/ServerError.js";
import type { DetokenizeResult, TokenizeResult } from "../core/TokenizeRequest.js";
import { toUpstreamChatRequest } from "../protocols/openai/toUpstreamChatRequest.js";
import { UpstreamChunkReader } from "../protocols/openai/UpstreamChunkReader.js";
import { EndpointPool, type Endpoint } from "./EndpointPool.js";
import type { UpstreamModels } from "./upstreamConfig.js";

export interface UpstreamTimeouts {
  /** To the upstream's response headers and first chunk: a hung endpoint's requests go elsewhere. */
  firstByteMs: number;
  /** Between two chunks of a stream: a stream that stalls longer ends with an error event. */
  idleMs: number;
}

/** One attempt on one endpoint, as it ended: what metrics count. */
export interface UpstreamAttempt {
  model: string;
  endpoint: string;
  /** ok: it answered (a stream ended, or the client left); refused: a 4xx the client caused; error: the endpoint failed. */
  outcome: "ok" | "refused" | "error";
  seconds: number;
  /** Sent to the endpoint the conversation prefers (an affinity hit); undefined without a conversation key. */
  preferred: boolean | undefined;
}

interface UpstreamModel {
  info: ModelInfo;
  /** Its declaration in the upstreams file, as read: a reload keeps the model when it is the same. */
  declaration: string;
  /** The upstream's name for it. */
  model: string;
  pool: EndpointPool;
}

/**
 * Output reserved for a request that sets no max_tokens (the hosted profile's limits reserve it,
 * then settle to what the upstream reports it used).
 */
const DEFAULT_MAX_OUTPUT = 4096;

/** An upstream's answer the client caused (4xx): not the endpoint's fault, and not worth another endpoint. */
class UpstreamRefusal extends Error {}

/**
 * The Engine over upstream inference servers (issue 34): each declared model is served by a pool of
 * OpenAI-compatible endpoints (EndpointPool), through their streamed chat completions. A request goes
 * to the endpoint its conversation prefers (the one holding its prompt cache) while it is healthy and
 * under its bounded load, and to another one if the endpoint fails before the first chunk; once a
 * chunk has come, a failure ends the stream with an error event, as it would in process. What the
 * upstream's chat completions cannot carry (a prompt given as is, tokenizing, rendering the prompt
 * here) is a 400 that names the model and says so.
 */
export class UpstreamEngine implements Engine {
  readonly #models = new Map<string, UpstreamModel>();
  readonly #timeouts: UpstreamTimeouts;
  readonly #fetch: typeof fetch;
  /** Told of every attempt as it ends (the server's metrics). */
  onAttempt: (attempt: UpstreamAttempt) => void = () => {};
  #healthTimer: NodeJS.Timeout | undefined;

  constructor(models: UpstreamModels, options: { timeouts: UpstreamTimeouts; fetch?: typeof fetch }) {
    this.#timeouts = options.timeouts;
    this.#fetch = options.fetch ?? fetch;
    this.replace(models);
  }

  /**
   * Serves `models` from now on (the upstreams file read again, on SIGHUP). A model declared as
   * before keeps its pool, with its requests in flight and its endpoints' health; requests under
   * way on a pool that goes keep it until they end, so none is dropped.
   */
  replace(models: UpstreamModels): void {
    const created = Math.floor(Date.now() / 1000);
    const previous = new Map(this.#models);
    this.#models.clear();
    for (const [name, declared] of models) {
      const declaration = JSON.stringify(declared);
      const kept = previous.get(name);
      if (kept && kept.declaration === declaration) {
        this.#models.set(name, kept);
        continue;
      }
      this.#models.set(name, {
        declaration,
        model: declared.model ?? name,
        pool: new EndpointPool(declared.endpoints, { routing: declared.routing }),
        info: {
          id: name,
          aliases: [],
          path: declared.endpoints.map((endpoint) => endpoint.url).join(" "),
          sizeBytes: 0,
          created,
          architecture: "upstream",
          hasChatTemplate: true,
          fillInTheMiddle: false,
          capabilities: ["chat"],
          templateFeatures: ["tools"],
        },
      });
    }
  }

  /** Whether `name` is one of the upstream models. */
  serves(name: string): boolean {
    return this.#find(name) !== undefined;
  }

  /** The pools, by model name (metrics read their endpoints). */
  get pools(): ReadonlyMap<string, EndpointPool> {
    return new Map([...this.#models].map(([name, model]) => [name, model.pool]));
  }

  async listModels(): Promise<ModelInfo[]> {
    return [...this.#models.values()].map((model) => model.info);
  }

  async findModel(name: string): Promise<ModelInfo | undefined> {
    return this.#find(name)?.info;
  }

  async chat(request: ChatRequest, options: RequestOptions): Promise<ChatStream> {
    const [stream] = await this.chatChoices(request, options);
    return stream!;
  }

  async chatChoices(request: ChatRequest, options: RequestOptions): Promise<ChatStream[]> {
    const model = this.#model(request.model);
    if ((request.n ?? 1) > 1) throw this.#cannot(request.model, "n > 1 (several choices)", "n");
    const body = toUpstreamChatRequest(request, model.model);
    // The prompt's size is the upstream's to tell: its usage settles the admission, which reserves
    // an estimate (4 bytes a token, about what BPE vocabularies average on English) and the output cap.
    const estimate = Math.ceil(Buffer.byteLength(JSON.stringify(body.messages)) / 4);
    const ticket = await options.admit?.({ promptTokens: estimate, maxOutputTokens: request.maxTokens ?? DEFAULT_MAX_OUTPUT });
    if (ticket && ticket.maxOutputTokens < (request.maxTokens ?? Infinity)) body.max_tokens = ticket.maxOutputTokens;
    try {
      return [await this.#send(model, body, conversationKey(request), options.signal, ticket)];
    } catch (error) {
      ticket?.settle({ promptTokens: 0, completionTokens: 0 });
      throw error;
    }
  }

  /** Sends the request to an endpoint of the pool, and to the next one if it fails before its first chunk. */
  async #send(
    model: UpstreamModel,
    body: Record<string, unknown>,
    key: string,
    signal: AbortSignal,
    ticket: AdmissionTicket | undefined,
  ): Promise<ChatStream> {
    const tried = new Set<Endpoint>();
    let lastFailure = "";
    for (;;) {
      const pick = model.pool.pick(key, tried);
      if (!pick) {
        throw new ServerError("overloaded", {
          retryAfter: 1,
          message: `No upstream endpoint of \`${model.info.id}\` can take the request now${lastFailure ? ` (the last one tried: ${lastFailure})` : ": all are busy or down"}. Retry shortly.`,
        });
      }
      tried.add(pick.endpoint);
      const started = performance.now();
      const attempt = (outcome: UpstreamAttempt["outcome"]) =>
        this.onAttempt({
          model: model.info.id,
          endpoint: pick.endpoint.spec.url,
          outcome,
          seconds: (performance.now() - started) / 1000,
          preferred: pick.preferred,
        });
      try {
        return await this.#open(model, pick.endpoint, body, signal, ticket, attempt);
      } catch (error) {
        const refused = error instanceof UpstreamRefusal;
        // The client leaving, or refusing what it sent, is no fault of the endpoint.
        const endpointFine = refused || signal.aborted;
        model.pool.end(pick.endpoint, endpointFine);
        attempt(refused ? "refused" : endpointFine ? "ok" : "error");
        if (signal.aborted) throw signal.reason;
        if (refused) throw new ServerError("invalid_request", { message: error.message });
        lastFailure = `${pick.endpoint.spec.url}: ${(error as Error).message}`;
      }
    }
  }

  /** Opens the stream on one endpoint and reads up to its first chunk: then the request is this endpoint's. */
  async #open(
    model: UpstreamModel,
    endpoint: Endpoint,
    body: Record<string, unknown>,
    signal: AbortSignal,
    ticket: AdmissionTicket | undefined,
    attempt: (outcome: UpstreamAttempt["outcome"]) => void,
  ): Promise<ChatStream> {
    // A client that left before this point has no abort event left to fire.
    signal.throwIfAborted();
    const controller = new AbortController();
    const stop = () => controller.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    const firstByte = setTimeout(
      () => controller.abort(new Error(`no first chunk within ${this.#timeouts.firstByteMs} ms`)),
      this.#timeouts.firstByteMs,
    );
    const release = () => {
      clearTimeout(firstByte);
      signal.removeEventListener("abort", stop);
      controller.abort();
    };
    try {
      const response = await this.#fetch(`${endpoint.spec.url}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(endpoint.spec.key ? { authorization: `Bearer ${endpoint.spec.key}` } : {}) },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok || !response.body) {
        const text = (await response.text().catch(() => "")).slice(0, 2000);
        const message = upstreamMessage(text) ?? `HTTP ${response.status}`;
        if (response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429) {
          throw new UpstreamRefusal(`The upstream serving \`${model.info.id}\` refused the request: ${message}`);
        }
        throw new Error(`HTTP ${response.status}: ${message}`);
      }
      const chunks = readChunks(response.body, this.#timeouts.idleMs, controller);
      const first = await chunks.next();
      clearTimeout(firstByte);
      return this.#stream(model, endpoint, { first, chunks, signal }, ticket, (failed) => {
        release();
        attempt(failed ? "error" : "ok");
      });
    } catch (error) {
      // A timeout of ours aborted the request: say which (the fetch only says it was aborted).
      const reason = controller.signal.aborted && !signal.aborted ? (controller.signal.reason as Error) : error;
      release();
      throw reason;
    }
  }

  /** The events of an opened stream; its end gives the endpoint back to the pool and settles the admission. */
  #stream(
    model: UpstreamModel,
    endpoint: Endpoint,
    { first, chunks, signal }: { first: IteratorResult<unknown, void>; chunks: AsyncGenerator<unknown, void>; signal: AbortSignal },
    ticket: AdmissionTicket | undefined,
    /** Called once as the stream ends, `failed` if the upstream failed it. */
    release: (failed: boolean) => void,
  ): ChatStream {
    const reader = new UpstreamChunkReader();
    const pool = model.pool;
    const name = model.info.id;
    let ended = false;
    let settled = false;
    // Once, however the stream ends: read to its end, failed, or returned by its reader (even before
    // its first event, when a generator's own `finally` would not run).
    const end = async (failed: boolean) => {
      if (ended) return;
      ended = true;
      // A client that left, or a stream that failed: what the upstream used is unknown, and the
      // reservation goes (the upstream counts it in its own metrics).
      if (!settled) ticket?.settle({ promptTokens: 0, completionTokens: 0 });
      pool.end(endpoint, !failed);
      await chunks.return();
      release(failed);
    };
    async function* events(): AsyncGenerator<ChatEvent, void, undefined> {
      let failed = false;
      try {
        if (!first.done) {
          yield* reader.read(first.value);
          for await (const chunk of chunks) yield* reader.read(chunk);
        }
        const done = reader.finish();
        ticket?.settle({ promptTokens: done.usage.promptTokens, completionTokens: done.usage.completionTokens });
        settled = true;
        yield done;
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        failed = true;
        throw new ServerError("engine_unavailable", {
          message: `The upstream ${endpoint.spec.url} serving \`${name}\` failed mid-stream: ${(error as Error).message}.`,
          cause: error,
        });
      } finally {
        await end(failed);
      }
    }
    const iterator = events();
    let started = false;
    const stream: ChatStream = {
      next: () => {
        started = true;
        return iterator.next();
      },
      return: async () => {
        if (!started) await end(false);
        return iterator.return(undefined);
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
    return stream;
  }

  renderPrompt(request: ChatRequest): Promise<PromptPreview> {
    return this.#refuse(request.model, "rendering the prompt here (POST /apply-template, count_tokens)");
  }

  embed(request: { model: string }): Promise<EmbedResult> {
    return this.#refuse(request.model, "embeddings");
  }

  rerank(request: { model: string }): Promise<RerankResult> {
    return this.#refuse(request.model, "rerank");
  }

  tokenize(request: { model: string }): Promise<TokenizeResult> {
    return this.#refuse(request.model, "tokenizing");
  }

  detokenize(request: { model: string }): Promise<DetokenizeResult> {
    return this.#refuse(request.model, "detokenizing");
  }

  async load(name: string, _options: LoadOptions): Promise<{ model: ModelInfo; loadMs: number }> {
    return { model: this.#model(name).info, loadMs: 0 };
  }

  async unload(name: string): Promise<ModelInfo> {
    return this.#model(name).info;
  }

  async describeModel(name: string): Promise<ModelDescription | undefined> {
    const model = this.#find(name);
    return model && { info: model.info, metadata: { "general.architecture": "upstream" }, thinks: false, tools: true };
  }

  async modelDigest(model: ModelInfo): Promise<string> {
    return createHash("sha256").update(`${model.id}\n${model.path}`).digest("hex");
  }

  status(): EngineStatus {
    return {
      ready: true,
      backend: null,
      loaded: [],
      counters: { promptEvaluations: 0, promptTokensEvaluated: 0, promptCopies: 0, promptTokensRestored: 0 },
      promptCacheBytes: 0,
    };
  }

  /**
   * Active health checks: every `intervalMs`, each endpoint's `GET …/models` (every OpenAI-compatible
   * server answers it) must answer 2xx within `timeoutMs`. One that does not is taken out at once;
   * one that does is put back, so an endpoint that recovered is used again before a request has to
   * try it, and one that died is left before a request finds out.
   */
  checkHealth(intervalMs: number, timeoutMs = Math.min(intervalMs, 5_000)): void {
    clearInterval(this.#healthTimer);
    const check = async () => {
      const checks = [...this.#models.values()].flatMap(({ pool }) =>
        pool.endpoints.map(async (endpoint) => {
          const { url, key } = endpoint.spec;
          const healthy = await this.#fetch(`${url}/models`, {
            headers: key ? { authorization: `Bearer ${key}` } : {},
            signal: AbortSignal.timeout(timeoutMs),
          }).then(
            async (response) => {
              await response.body?.cancel();
              return response.ok;
            },
            () => false,
          );
          if (healthy && endpoint.down) pool.markUp(endpoint);
          else if (!healthy && !endpoint.down) pool.markDown(endpoint);
        }),
      );
      await Promise.all(checks);
    };
    this.#healthTimer = setInterval(() => void check(), intervalMs);
    // A check must not keep the process alive on its own.
    this.#healthTimer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.#healthTimer);
  }

  #find(name: string): UpstreamModel | undefined {
    for (const candidate of nameCandidates(name)) {
      const model = this.#models.get(candidate);
      if (model) return model;
    }
    return undefined;
  }

  #model(name: string): UpstreamModel {
    const model = this.#find(name);
    if (!model) throw new ServerError("model_not_found", { model: name, param: "model" });
    return model;
  }

  #cannot(name: string, what: string, param?: string): ServerError {
    this.#model(name);
    return new ServerError("invalid_request", {
      ...(param === undefined ? {} : { param }),
      message: `The model \`${name}\` is served by upstream servers through their chat completions, which do not offer ${what} here.`,
    });
  }

  async #refuse(name: string, what: string): Promise<never> {
    throw this.#cannot(name, what);
  }
}

/**
 * The key that keeps a conversation on one endpoint: its model, system prompt and first user
 * message, which its later turns repeat (a conversation's prompt grows at the end). Two
 * conversations that begin alike share an endpoint, and with it the cache of what they share.
 */
export function conversationKey(request: ChatRequest): string {
  const system = request.messages.filter((message) => message.role === "system").map((message) => message.content);
  const user = request.messages.find((message) => message.role === "user");
  const images =
    user?.role === "user"
      ? (user.images ?? []).map((image) => (image.source.type === "checked" ? image.source.image.bytes.length : 0))
      : [];
  return createHash("sha256")
    .update(JSON.stringify([request.model, system, user?.content ?? "", images]))
    .digest("hex");
}

/** The upstream's error message, from an OpenAI-shaped (or Ollama-shaped) error body. */
function upstreamMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof body.error === "string" ? body.error : (body.error?.message ?? body.message);
    return typeof message === "string" ? message : undefined;
  } catch {
    return text.trim() || undefined;
  }
}

/**
 * The JSON of each server-sent event of a stream, until `[DONE]` or its end. A gap of more than
 * `idleMs` between two reads aborts the request (`controller`).
 */
async function* readChunks(body: ReadableStream<Uint8Array>, idleMs: number, controller: AbortController): AsyncGenerator<unknown, void> {
  const pending: unknown[] = [];
  let finished = false;
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === "[DONE]") finished = true;
      else pending.push(JSON.parse(event.data));
    },
  });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let idle: NodeJS.Timeout | undefined;
  try {
    while (!finished) {
      idle = setTimeout(() => controller.abort(new Error(`no chunk for ${idleMs} ms`)), idleMs);
      const { done, value } = await reader.read();
      clearTimeout(idle);
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (pending.length > 0) yield pending.shift();
    }
  } finally {
    clearTimeout(idle);
    reader.releaseLock();
  }
}
