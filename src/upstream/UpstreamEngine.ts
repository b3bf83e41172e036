import { createHash } from "node:crypto";
import { createParser } from "eventsource-parser";
import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";
import { choiceSeed, type ChatRequest } from "../core/ChatRequest.js";
import type { EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { AdmissionTicket, Engine, LoadOptions, PromptPreview, RequestOptions } from "../core/Engine.js";
import { zeroCounters, type EngineStatus, type ModelDescription, type ModelInfo } from "../core/ModelInfo.js";
import { nameCandidates } from "../core/modelName.js";
import type { RerankRequest, RerankResult } from "../core/RerankRequest.js";
import { ServerError } from "../core/ServerError.js";
import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "../core/TokenizeRequest.js";
import {
  fromUpstreamDetokenize,
  fromUpstreamEmbeddings,
  fromUpstreamRerank,
  fromUpstreamTokenize,
} from "../protocols/openai/fromUpstreamResponse.js";
import {
  toUpstreamChatRequest,
  toUpstreamCompletionRequest,
  toUpstreamDetokenizeRequest,
  toUpstreamEmbeddingRequest,
  toUpstreamRerankRequest,
  toUpstreamTokenizeRequest,
} from "../protocols/openai/toUpstreamRequest.js";
import { UpstreamChunkReader, UpstreamLogprobsMissing, UpstreamUsageMissing } from "../protocols/openai/UpstreamChunkReader.js";
import { EndpointPool, type Endpoint, type EndpointSpec } from "./EndpointPool.js";
import type { UpstreamModels } from "./upstreamConfig.js";
import { httpTransport, type UpstreamTransport } from "./httpTransport.js";
import { shareTicket } from "./shareTicket.js";

export interface UpstreamTimeouts {
  /** To a new connection's being made: an endpoint that does not answer at all is left at once. */
  connectMs: number;
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
  rerankScores: "probability" | "logit";
}

/** One of the upstream's routes: its path, below the endpoint's URL or at its server's root (llama-server's /tokenize). */
interface Route {
  path: string;
  root?: boolean;
  /** What it serves, as an error names it ("tokenizing"). */
  what: string;
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
 * chunk has come, a failure ends the stream with an error event, as it would in process. Legacy
 * completions, embeddings, rerank and the tokenizer go to the upstream's own endpoints for them;
 * what a model's declaration does not list, or the gateway cannot do without a template or
 * tokenizer of its own (rendering the prompt here), is a 400 that names the model and says so.
 */
export class UpstreamEngine implements Engine {
  readonly #models = new Map<string, UpstreamModel>();
  readonly #timeouts: UpstreamTimeouts;
  readonly #transport: UpstreamTransport;
  /** Told of every attempt as it ends (the server's metrics). */
  onAttempt: (attempt: UpstreamAttempt) => void = () => {};
  #healthTimer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Ends the kept-alive connections of the engine's own transport. */
  #closeTransport = () => {};

  /** `transport`: how requests go out (default node:http, httpTransport; tests give `fetch`). */
  constructor(models: UpstreamModels, options: { timeouts: UpstreamTimeouts; transport?: UpstreamTransport }) {
    this.#timeouts = options.timeouts;
    if (options.transport) this.#transport = options.transport;
    else {
      const transport = httpTransport({ connectTimeoutMs: this.#timeouts.connectMs });
      this.#transport = transport;
      this.#closeTransport = transport.close;
    }
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
      const capabilities = declared.capabilities.filter((capability) => capability !== "vision");
      const chat = capabilities.includes("chat");
      this.#models.set(name, {
        declaration,
        model: declared.model ?? name,
        pool: new EndpointPool(declared.endpoints, { routing: declared.routing }),
        rerankScores: declared.rerankScores,
        info: {
          id: name,
          aliases: [],
          path: declared.endpoints.map((endpoint) => endpoint.url).join(" "),
          sizeBytes: 0,
          created,
          architecture: "upstream",
          hasChatTemplate: chat,
          fillInTheMiddle: false,
          capabilities,
          ...(chat ? { templateFeatures: ["tools"] as const } : {}),
          ...(declared.capabilities.includes("vision") ? { upstreamVision: true } : {}),
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

  /**
   * `n` choices are `n` requests to the endpoint the conversation prefers, each its own seed (as
   * the engine's choices: choiceSeed), which every server serves (llama-server has no `n`): the
   * first is opened alone, so a server that caches prompts across requests (vLLM) reads the
   * prompt once, then the others together. A prompt given as is goes to legacy completions.
   */
  async chatChoices(request: ChatRequest, options: RequestOptions): Promise<ChatStream[]> {
    const model = this.#model(request.model);
    this.#require(model, "chat");
    const n = request.n ?? 1;
    const body = request.prompt ? toUpstreamCompletionRequest(request, model.model) : toUpstreamChatRequest(request, model.model);
    const route: Route = request.prompt
      ? { path: "/completions", what: "legacy completions" }
      : { path: "/chat/completions", what: "chat completions" };
    // Echo writes the prompt back before the completion: a text prompt is written here; token
    // ids would need the upstream's detokenizer, and the prompt's logprobs its scoring.
    const echo = request.echo && request.prompt?.type === "raw" ? request.prompt.text : undefined;
    if (request.echo && (echo === undefined || request.logprobs)) {
      throw this.#cannot(request.model, "echo of a prompt given as token ids, or with logprobs", "echo");
    }
    // The prompt's size is the upstream's to tell: its usage settles the admission, which reserves
    // an estimate (the tools' schemas are rendered into the prompt too) and the output cap.
    const estimate = estimateTokens(JSON.stringify([body.messages ?? body.prompt, body.tools ?? []]));
    const perChoice = request.maxTokens ?? DEFAULT_MAX_OUTPUT;
    const ticket = await options.admit?.({ promptTokens: estimate, maxOutputTokens: perChoice * n });
    // What the limits grant is shared by the choices, as the engine shares it (at least a token each).
    const granted = ticket ? Math.max(1, Math.floor(ticket.maxOutputTokens / n)) : Infinity;
    if (granted < (request.maxTokens ?? Infinity)) body.max_tokens = granted;
    const tickets = shareTicket(ticket, n);
    const key = conversationKey(request);
    const logprobs = request.logprobs !== undefined;
    const open = (choice: number) => {
      const seed = choiceSeed(request.sampling.seed, choice);
      const choiceBody = seed === undefined ? body : { ...body, seed };
      return this.#send(model, route, choiceBody, {
        key,
        signal: options.signal,
        ticket: tickets[choice],
        logprobs,
        estimate,
      });
    };
    const opened: ChatStream[] = [];
    try {
      opened.push(await open(0));
      const rest = await Promise.allSettled(Array.from({ length: n - 1 }, (_, i) => open(i + 1)));
      for (const result of rest) if (result.status === "fulfilled") opened.push(result.value);
      const failed = rest.find((result) => result.status === "rejected");
      if (failed) throw failed.reason;
    } catch (error) {
      // The choices opened give their endpoints back; every share of the admission is settled.
      await Promise.all(opened.map((stream) => stream.return()));
      for (const share of tickets) share?.settle({ promptTokens: 0, completionTokens: 0 });
      throw error;
    }
    return echo === undefined ? opened : opened.map((stream) => withFirst(stream, { type: "text", text: echo }));
  }

  async embed(request: EmbedRequest, options: RequestOptions): Promise<EmbedResult> {
    const model = this.#model(request.model);
    this.#require(model, "embeddings");
    const body = toUpstreamEmbeddingRequest(request, model.model);
    const estimate = request.inputs.reduce((sum, input) => sum + (typeof input === "string" ? estimateTokens(input) : input.length), 0);
    const { vectors, promptTokens } = await this.#exchange(
      model,
      { path: "/embeddings", what: "embeddings" },
      body,
      options,
      estimate,
      (reply) => fromUpstreamEmbeddings(reply, request.inputs.length, request.dimensions),
    );
    return { vectors, promptTokens, loadMs: 0 };
  }

  async rerank(request: RerankRequest, options: RequestOptions): Promise<RerankResult> {
    const model = this.#model(request.model);
    this.#require(model, "rerank");
    const body = toUpstreamRerankRequest(request, model.model);
    // The query is read with each document.
    const estimate = request.documents.reduce((sum, document) => sum + estimateTokens(request.query + document), 0);
    const { scores, promptTokens } = await this.#exchange(model, { path: "/rerank", what: "rerank" }, body, options, estimate, (reply) =>
      fromUpstreamRerank(reply, request.documents.length, model.rerankScores),
    );
    return { scores, promptTokens, loadMs: 0 };
  }

  async tokenize(request: TokenizeRequest, options: RequestOptions): Promise<TokenizeResult> {
    const model = this.#model(request.model);
    const route = { path: "/tokenize", root: true, what: "tokenizing (POST /tokenize at its root)" };
    const { tokens } = await this.#exchange(model, route, toUpstreamTokenizeRequest(request, model.model), options, 0, (reply) => ({
      tokens: fromUpstreamTokenize(reply, request.withPieces),
      promptTokens: 0,
    }));
    if (!tokens) throw this.#cannot(request.model, "the tokens' pieces (its /tokenize gives ids only)", "with_pieces");
    return tokens;
  }

  async detokenize(request: DetokenizeRequest, options: RequestOptions): Promise<DetokenizeResult> {
    const model = this.#model(request.model);
    const route = { path: "/detokenize", root: true, what: "detokenizing (POST /detokenize at its root)" };
    const { content } = await this.#exchange(model, route, toUpstreamDetokenizeRequest(request, model.model), options, 0, (reply) => ({
      content: fromUpstreamDetokenize(reply),
      promptTokens: 0,
    }));
    return { content };
  }

  /**
   * Runs `attempt` on an endpoint of the pool, and on the next one if it fails before the request
   * is the endpoint's (a stream's first chunk, a reply's body). `attempt` gives the endpoint back
   * itself once it succeeds (a stream holds it to its end); a failed attempt's is given back here.
   */
  async #route<T>(
    model: UpstreamModel,
    key: string | undefined,
    signal: AbortSignal,
    attempt: (endpoint: Endpoint, done: (outcome: UpstreamAttempt["outcome"]) => void) => Promise<T>,
  ): Promise<T> {
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
      const done = (outcome: UpstreamAttempt["outcome"]) =>
        this.onAttempt({
          model: model.info.id,
          endpoint: pick.endpoint.spec.url,
          outcome,
          seconds: (performance.now() - started) / 1000,
          preferred: pick.preferred,
        });
      try {
        return await attempt(pick.endpoint, done);
      } catch (error) {
        const refused = error instanceof UpstreamRefusal;
        // The client leaving, or refusing what it sent, is no fault of the endpoint.
        const endpointFine = refused || signal.aborted;
        model.pool.end(pick.endpoint, endpointFine);
        done(refused ? "refused" : endpointFine ? "ok" : "error");
        if (signal.aborted) throw signal.reason;
        if (refused) throw new ServerError("invalid_request", { message: error.message });
        lastFailure = `${endpointName(model.pool, pick.endpoint)}: ${(error as Error).message}`;
      }
    }
  }

  /** Streams the request from an endpoint of the pool: the endpoint is the request's once its first chunk has come. */
  #send(
    model: UpstreamModel,
    route: Route,
    body: Record<string, unknown>,
    {
      key,
      signal,
      ticket,
      logprobs,
      estimate,
    }: { key: string; signal: AbortSignal; ticket: AdmissionTicket | undefined; logprobs: boolean; estimate: number },
  ): Promise<ChatStream> {
    return this.#route(model, key, signal, async (endpoint, done) => {
      const { response, controller, release } = await this.#post(model, endpoint, route, body, signal);
      try {
        const chunks = readChunks(response.body!, this.#timeouts.idleMs, controller);
        const first = await chunks.next();
        release.firstByte();
        const reader = new UpstreamChunkReader({ logprobs });
        return this.#stream(model, endpoint, { first, chunks, signal, reader, estimate }, ticket, (failed) => {
          release.all();
          done(failed ? "error" : "ok");
        });
      } catch (error) {
        throw release.failed(error);
      }
    });
  }

  /**
   * One JSON request and its reply (embeddings, rerank, the tokenizer), on an endpoint of the pool,
   * admitted with `estimate` prompt tokens and settled to the upstream's count (`read`'s).
   */
  async #exchange<T extends { promptTokens: number }>(
    model: UpstreamModel,
    route: Route,
    body: Record<string, unknown>,
    options: RequestOptions,
    estimate: number,
    read: (reply: unknown) => T,
  ): Promise<T> {
    const ticket = await options.admit?.({ promptTokens: estimate, maxOutputTokens: 0 });
    let result: T | undefined;
    try {
      result = await this.#route(model, undefined, options.signal, async (endpoint, done) => {
        const { response, release } = await this.#post(model, endpoint, route, body, options.signal);
        let reply: unknown;
        try {
          reply = await response.json();
        } catch (error) {
          throw release.failed(error);
        }
        release.all();
        // What the reply says is read once it is the endpoint's: a malformed one is its failure.
        try {
          const parsed = read(reply);
          model.pool.end(endpoint, true);
          done("ok");
          return parsed;
        } catch (error) {
          model.pool.end(endpoint, false);
          done("error");
          throw new ServerError("engine_unavailable", {
            message: `The upstream endpoint ${endpointName(model.pool, endpoint)} serving \`${model.info.id}\` failed: ${(error as Error).message}.`,
          });
        }
      });
      return result;
    } finally {
      ticket?.settle({ promptTokens: result?.promptTokens ?? 0, completionTokens: 0 });
    }
  }

  /**
   * POSTs `body` to one endpoint, up to its response's headers, within the first-byte timeout
   * (which the caller ends with `release.firstByte()` once its first byte has come). A 4xx the
   * client caused is an UpstreamRefusal; any other failure an Error naming it.
   */
  async #post(model: UpstreamModel, endpoint: Endpoint, route: Route, body: Record<string, unknown>, signal: AbortSignal) {
    // A client that left before this point has no abort event left to fire.
    signal.throwIfAborted();
    const controller = new AbortController();
    const stop = () => controller.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    const firstByte = setTimeout(
      () => controller.abort(new Error(`no first byte within ${this.#timeouts.firstByteMs} ms`)),
      this.#timeouts.firstByteMs,
    );
    const release = {
      firstByte: () => clearTimeout(firstByte),
      all: () => {
        clearTimeout(firstByte);
        signal.removeEventListener("abort", stop);
        controller.abort();
      },
      /** The error to throw: a timeout of ours aborted the request, say which (the transport only says it was aborted). */
      failed: (error: unknown) => {
        const reason = controller.signal.aborted && !signal.aborted ? (controller.signal.reason as Error) : error;
        release.all();
        return reason;
      },
    };
    const base = route.root ? endpoint.spec.url.replace(/\/v1$/, "") : endpoint.spec.url;
    try {
      const response = await this.#transport(`${base}${route.path}`, {
        method: "POST",
        headers: headersFor(endpoint.spec, true),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok || !response.body) {
        const text = (await response.text().catch(() => "")).slice(0, 2000);
        const message = upstreamMessage(text) ?? `HTTP ${response.status}`;
        if (response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429) {
          throw new UpstreamRefusal(
            `The upstream endpoint ${endpointName(model.pool, endpoint)} serving \`${model.info.id}\` refused ${route.what}: ${message}`,
          );
        }
        throw new Error(`HTTP ${response.status}: ${message}`);
      }
      return { response, controller, release };
    } catch (error) {
      throw release.failed(error);
    }
  }

  /** The events of an opened stream; its end gives the endpoint back to the pool and settles the admission. */
  #stream(
    model: UpstreamModel,
    endpoint: Endpoint,
    {
      first,
      chunks,
      signal,
      reader,
      estimate,
    }: {
      first: IteratorResult<unknown, void>;
      chunks: AsyncGenerator<unknown, void>;
      signal: AbortSignal;
      reader: UpstreamChunkReader;
      /** The prompt's estimated size, settled to when no usage comes. */
      estimate: number;
    },
    ticket: AdmissionTicket | undefined,
    /** Called once as the stream ends, `failed` if the upstream failed it. */
    release: (failed: boolean) => void,
  ): ChatStream {
    const pool = model.pool;
    const name = model.info.id;
    let ended = false;
    let settled = false;
    let chunksRead = 0;
    // Once, however the stream ends: read to its end, failed, or returned by its reader (even before
    // its first event, when a generator's own `finally` would not run).
    const end = async (failed: boolean) => {
      if (ended) return;
      ended = true;
      // A client that left, or a stream that failed, before the upstream's usage came: settled to
      // the prompt's estimate and a token a chunk read (llama-server, vLLM and modelhost stream a
      // token a chunk), so leaving early does not make what was read free.
      if (!settled) ticket?.settle({ promptTokens: estimate, completionTokens: chunksRead });
      pool.end(endpoint, !failed);
      await chunks.return();
      release(failed);
    };
    async function* events(): AsyncGenerator<ChatEvent, void, undefined> {
      let failed = false;
      try {
        if (!first.done) {
          chunksRead++;
          yield* reader.read(first.value);
          for await (const chunk of chunks) {
            chunksRead++;
            yield* reader.read(chunk);
          }
        }
        const done = reader.finish();
        ticket?.settle({ promptTokens: done.usage.promptTokens, completionTokens: done.usage.completionTokens });
        settled = true;
        yield done;
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (error instanceof UpstreamLogprobsMissing) {
          throw new ServerError("invalid_request", {
            param: "logprobs",
            message: `The upstream endpoint ${endpointName(pool, endpoint)} serving \`${name}\` gives no logprobs.`,
          });
        }
        failed = true;
        throw new ServerError("engine_unavailable", {
          message: `The upstream endpoint ${endpointName(pool, endpoint)} serving \`${name}\` failed mid-stream: ${(error as Error).message}.`,
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
      counters: zeroCounters(),
      promptCacheBytes: 0,
    };
  }

  /**
   * Active health checks: `intervalMs` after the last round ended, each endpoint's `GET …/models`
   * (every OpenAI-compatible server answers it) must answer 2xx within `timeoutMs`. One that does
   * not is taken out at once; one that does is put back, so an endpoint that recovered is used again
   * before a request has to try it, and one that died is left before a request finds out. The
   * timeout is at least 1 s whatever the interval: a busy server (or a busy gateway: on 2 cores
   * under a test suite, a loopback answer took over 100 ms) is not a dead one.
   */
  checkHealth(intervalMs: number, timeoutMs = Math.min(Math.max(intervalMs, 1_000), 5_000)): void {
    clearTimeout(this.#healthTimer);
    const round = async () => {
      const checks = [...this.#models.values()].flatMap(({ pool }) =>
        pool.endpoints.map(async (endpoint) => {
          let healthy: boolean;
          try {
            const response = await this.#transport(`${endpoint.spec.url}/models`, {
              method: "GET",
              headers: headersFor(endpoint.spec, false),
              signal: AbortSignal.timeout(timeoutMs),
            });
            // Read to its end (a few hundred bytes), so the connection is kept for the next check.
            await response.text();
            healthy = response.ok;
          } catch {
            // Refused, timed out, or cut while its body was read.
            healthy = false;
          }
          if (healthy && endpoint.down) pool.markUp(endpoint);
          // Also when failed requests took it out already: then the check holds it out (markDown).
          else if (!healthy) pool.markDown(endpoint);
        }),
      );
      await Promise.all(checks);
      if (!this.#closed) schedule();
    };
    // One round at a time: a hung endpoint's checks do not pile up.
    const schedule = () => {
      this.#healthTimer = setTimeout(() => void round(), intervalMs);
      // A check must not keep the process alive on its own.
      this.#healthTimer.unref();
    };
    schedule();
  }

  /**
   * Checks that every chat endpoint of `models` reports its usage, which limits and the ledger
   * settle to and which is not guessed at: a greedy one-token streamed chat completion to each,
   * concurrently, within `timeoutMs` (models already served as declared are not asked again). An
   * endpoint that answers without usage is a configuration
   * error (`noUsage`); one that cannot be asked now (down, busy, refusing the model) is only
   * reported (`unchecked`): it is checked by use, where a stream without usage is an error.
   */
  async checkUsage(
    models: UpstreamModels,
    timeoutMs = Math.min(this.#timeouts.firstByteMs, 10_000),
  ): Promise<Array<{ model: string; endpoint: string; noUsage: boolean; reason: string }>> {
    const probes = [...models].flatMap(([name, declared]) =>
      // A model served as declared now was checked when its declaration was read (a SIGHUP that
      // changes one model asks only that model's endpoints).
      declared.capabilities.includes("chat") && this.#models.get(name)?.declaration !== JSON.stringify(declared)
        ? declared.endpoints.map(async (spec) => {
            const { url } = spec;
            const body = {
              model: declared.model ?? name,
              messages: [{ role: "user", content: "Hi" }],
              max_tokens: 1,
              temperature: 0,
              stream: true,
              stream_options: { include_usage: true },
            };
            const controller = new AbortController();
            const timer = setTimeout(() => controller.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
            try {
              const response = await this.#transport(`${url}/chat/completions`, {
                method: "POST",
                headers: headersFor(spec, true),
                body: JSON.stringify(body),
                signal: controller.signal,
              });
              if (!response.ok || !response.body) {
                const text = (await response.text().catch(() => "")).slice(0, 500);
                return { model: name, endpoint: url, noUsage: false, reason: `HTTP ${response.status}: ${upstreamMessage(text) ?? ""}` };
              }
              const reader = new UpstreamChunkReader();
              for await (const chunk of readChunks(response.body, timeoutMs, controller)) reader.read(chunk);
              reader.finish();
              return undefined;
            } catch (error) {
              const reason = controller.signal.aborted ? (controller.signal.reason as Error).message : (error as Error).message;
              return { model: name, endpoint: url, noUsage: error instanceof UpstreamUsageMissing, reason };
            } finally {
              clearTimeout(timer);
            }
          })
        : [],
    );
    return (await Promise.all(probes)).filter((problem) => problem !== undefined);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#healthTimer);
    this.#closeTransport();
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
      message: `The model \`${name}\` is served by upstream servers, through which this server does not offer ${what}.`,
    });
  }

  /** Refuses what the model's declaration does not say its endpoints serve. */
  #require(model: UpstreamModel, capability: "chat" | "embeddings" | "rerank"): void {
    if (model.info.capabilities.includes(capability)) return;
    throw new ServerError("invalid_request", {
      message: `The model \`${model.info.id}\` is served by upstream servers declared to serve ${model.info.capabilities.join(", ")}, not ${capability} (its "capabilities" in the upstreams file).`,
    });
  }

  async #refuse(name: string, what: string): Promise<never> {
    throw this.#cannot(name, what);
  }
}

/**
 * The key that keeps a conversation on one endpoint: the client's own (`prompt_cache_key`), or its
 * model, system prompt and first user message, which its later turns repeat (a conversation's
 * prompt grows at the end). Two conversations that begin alike share an endpoint, and with it the
 * cache of what they share. A prompt given as is keys on its first 1,024 characters (about 250
 * tokens: what prompts built on one template or document share).
 */
export function conversationKey(request: ChatRequest): string {
  const hash = (parts: unknown[]) => createHash("sha256").update(JSON.stringify(parts)).digest("hex");
  if (request.promptCacheKey !== undefined) return hash([request.model, "key", request.promptCacheKey]);
  const prompt = request.prompt;
  if (prompt)
    return hash([
      request.model,
      "prompt",
      prompt.type === "raw"
        ? prompt.text.slice(0, 1024)
        : prompt.type === "tokens"
          ? prompt.tokens.slice(0, 256)
          : prompt.prefix.slice(0, 1024),
    ]);
  const system = request.messages.filter((message) => message.role === "system").map((message) => message.content);
  const user = request.messages.find((message) => message.role === "user");
  // An image by its size: its bytes are megabytes to hash again on every turn.
  const images =
    user?.role === "user"
      ? (user.images ?? []).map((image) => (image.source.type === "checked" ? image.source.image.bytes.length : 0))
      : [];
  return hash([request.model, system, user?.content ?? "", images]);
}

/**
 * A prompt's size before the upstream has counted it: 4 bytes a token, about what BPE vocabularies
 * average on English. Admissions reserve it and settle to the upstream's count.
 */
function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / 4);
}

/** An endpoint's request headers: its key, and the JSON body's type when there is one. */
function headersFor(spec: EndpointSpec, json: boolean): Record<string, string> {
  return { ...(json ? { "content-type": "application/json" } : {}), ...(spec.key ? { authorization: `Bearer ${spec.key}` } : {}) };
}

/**
 * An endpoint as clients read of it in errors: its `name` in the upstreams file, or its place in
 * its pool (#1, #2, …). Never its URL: a hosted gateway's clients have no business knowing its
 * fleet's addresses (the operator finds the endpoint in the file, and its URL in /metrics and logs).
 */
function endpointName(pool: EndpointPool, endpoint: Endpoint): string {
  return endpoint.spec.name ?? `#${pool.endpoints.indexOf(endpoint) + 1}`;
}

/** A stream whose first event is `event` (an echoed prompt), then `stream`'s. */
function withFirst(stream: ChatStream, event: ChatEvent): ChatStream {
  let sent = false;
  return {
    next: () => {
      if (sent) return stream.next();
      sent = true;
      return Promise.resolve({ value: event, done: false });
    },
    return: () => stream.return(),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
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
 * `idleMs` between two reads aborts the request (`controller`). After `[DONE]` the body is read to
 * its end (the servers end it there), so its connection is kept for the next request.
 */
async function* readChunks(body: AsyncIterable<Uint8Array>, idleMs: number, controller: AbortController): AsyncGenerator<unknown, void> {
  const pending: unknown[] = [];
  let finished = false;
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === "[DONE]") finished = true;
      else pending.push(JSON.parse(event.data));
    },
  });
  const decoder = new TextDecoder();
  const reads = body[Symbol.asyncIterator]();
  let idle: NodeJS.Timeout | undefined;
  let ended = false;
  const read = async () => {
    idle = setTimeout(() => controller.abort(new Error(`no chunk for ${idleMs} ms`)), idleMs);
    try {
      const result = await reads.next();
      ended = result.done === true;
      return result;
    } catch (error) {
      // Aborted (a timeout of ours, the client gone): its reason says why, the socket's error only "aborted".
      throw controller.signal.aborted ? controller.signal.reason : error;
    } finally {
      clearTimeout(idle);
    }
  };
  try {
    while (!finished) {
      const { done, value } = await read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (pending.length > 0) yield pending.shift();
    }
    // Past [DONE], a few reads at most: a server that goes on sending loses its connection instead.
    for (let extra = 0; extra < 4 && !ended; extra++) await read();
  } finally {
    clearTimeout(idle);
    if (!ended) await reads.return?.();
  }
}
