import type { FastifyInstance } from "fastify";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { LedgerBacklog } from "../access/UsageBuffer.js";
import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";
import type { Engine, RequestOptions } from "../core/Engine.js";
import { isServerError } from "../core/ServerError.js";
import { decorateEngine } from "../core/decorateEngine.js";
import { modelOfBody } from "./modelOfBody.js";

/** Seconds: from 10 ms (a cached prompt on a fast machine) to a minute (a long prompt on a CPU). */
const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds between tokens: 1 ms (GPU) to 1 s (a large model on a small CPU). */
const ITL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const TOKENS_PER_SECOND_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
const REQUEST_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
/** The period of the event-loop lag histogram's sampling timer (see the constructor). */
const EVENT_LOOP_SAMPLE_MS = 100;

export interface MetricsSources {
  engine: Engine;
  /** The hosted profile's usage ledger. */
  ledger?: () => LedgerBacklog;
  /** Metrics of the engine's own parts (the upstreams' endpoints), registered beside these. */
  more?: (registry: Registry) => void;
}

/**
 * The server's Prometheus metrics, in a registry of its own (several servers in one process, as in
 * tests, each count their own). Requests are counted by the matched route's URL pattern (never
 * the raw URL, which a client chooses), and `model` labels only take names the engine accepted,
 * so no client can grow the number of series.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  /**
   * Model names the engine has accepted (installed ids and aliases): the only values a `model`
   * label takes, so no client can grow the number of series with made-up names.
   */
  readonly #knownModels = new Set<string>();
  readonly #requests = new Counter({
    name: "modelhost_http_requests_total",
    help: 'HTTP requests by route pattern, method, status and model ("" for requests that name none or an unknown one).',
    labelNames: ["route", "method", "status", "model"] as const,
    registers: [this.registry],
  });
  readonly #requestSeconds = new Histogram({
    name: "modelhost_http_request_duration_seconds",
    help: "Time from a request's arrival to the end of its response (streams included), by route pattern.",
    labelNames: ["route", "method"] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly #promptTokens = new Counter({
    name: "modelhost_prompt_tokens_total",
    help: "Prompt tokens of generations and embeddings, by model.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });
  readonly #completionTokens = new Counter({
    name: "modelhost_completion_tokens_total",
    help: "Generated tokens, by model.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });
  readonly #generations = new Counter({
    name: "modelhost_generations_total",
    help: 'Generations by model and how they ended: a finish reason, "cancelled" (the client left) or "error".',
    labelNames: ["model", "finish_reason"] as const,
    registers: [this.registry],
  });
  readonly #ttft = new Histogram({
    name: "modelhost_time_to_first_token_seconds",
    help: "From the engine call (queueing and loading included) to the first generated piece.",
    labelNames: ["model"] as const,
    buckets: TTFT_BUCKETS,
    registers: [this.registry],
  });
  readonly #itl = new Histogram({
    name: "modelhost_inter_token_latency_seconds",
    help: "Between consecutive generated pieces of a generation (one token each, except text held back at a possible stop sequence).",
    labelNames: ["model"] as const,
    buckets: ITL_BUCKETS,
    registers: [this.registry],
  });
  readonly #tokensPerSecond = new Histogram({
    name: "modelhost_generation_tokens_per_second",
    help: "Decoding speed of each finished generation: tokens after the first over the time they took.",
    labelNames: ["model"] as const,
    buckets: TOKENS_PER_SECOND_BUCKETS,
    registers: [this.registry],
  });
  readonly #refusals = new Counter({
    name: "modelhost_rate_limit_refusals_total",
    help: "Requests refused by the hosted profile's limits, by kind: the limit hit (requests_per_minute, tokens_per_day, …), max_input_tokens, or limiter_unavailable.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });

  constructor({ engine, ledger, more }: MetricsSources) {
    more?.(this.registry);
    // The event-loop lag histogram samples with a timer of this period. prom-client's default, 10 ms,
    // woke the event loop 100 times a second whether or not anything happened: 540 of the main
    // thread's 1,248 context switches over 10 bench-model streams, each taking a core from the
    // decode's two threads. One server, a 10 ms timer switched on and off between streams: one
    // bench-model stream decoded 0.7% slower with it (median of 31 rounds, slower in 20). At 100 ms
    // the histogram still catches every stall of 100 ms or more.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    // Read from the engine and the ledger at each scrape.
    const status = () => engine.status().loaded;
    new Gauge({
      name: "modelhost_loaded_models",
      help: "Models resident in memory.",
      registers: [this.registry],
      collect() {
        this.set(status().length);
      },
    });
    const perModel = (name: string, help: string, value: (model: ReturnType<typeof status>[number]) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["model"] as const,
        registers: [this.registry],
        collect() {
          // Reset: a model unloaded since the last scrape must not keep its last value.
          this.reset();
          for (const model of status()) this.set({ model: model.id }, value(model));
        },
      });
    // The prompt cache beyond the sequences (--cache-ram): what it gave back, and what it holds.
    new Counter({
      name: "modelhost_prompt_cache_restored_tokens_total",
      help: "Prompt tokens restored from the prompt cache in host memory (--cache-ram) instead of decoded.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(engine.status().counters.promptTokensRestored);
      },
    });
    // Speculative decoding (--speculation): what was drafted, and what the model accepted of it.
    for (const [name, help, value] of [
      ["modelhost_draft_tokens_total", "Tokens drafted by speculative decoding (--speculation) for the model to check.", "draftTokens"],
      [
        "modelhost_draft_tokens_accepted_total",
        "Drafted tokens the model accepted: each one a token written without a decode of its own.",
        "draftTokensAccepted",
      ],
    ] as const)
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(engine.status().counters[value]);
        },
      });
    new Gauge({
      name: "modelhost_prompt_cache_bytes",
      help: "Host memory the prompt cache (--cache-ram) holds now: saved KV states of sequences.",
      registers: [this.registry],
      collect() {
        this.set(engine.status().promptCacheBytes);
      },
    });
    perModel("modelhost_active_sequences", "Requests decoding now, by loaded model.", (model) => model.active);
    perModel("modelhost_queue_depth", "Requests waiting for a free sequence, by loaded model.", (model) => model.queued);
    perModel("modelhost_model_load_seconds", "How long loading each resident model took.", (model) => model.loadMs / 1000);
    if (ledger) {
      new Gauge({
        name: "modelhost_usage_ledger_lag_seconds",
        help: "How long the oldest usage not yet written to the ledger has waited (0: all written). Normally under 0.02 s (one group commit); it grows while the store fails.",
        registers: [this.registry],
        collect() {
          this.set(ledger().lagMs / 1000);
        },
      });
      new Gauge({
        name: "modelhost_usage_ledger_pending_rows",
        help: "Usage rows waiting to be written to the ledger.",
        registers: [this.registry],
        collect() {
          this.set(ledger().pendingRows);
        },
      });
      new Gauge({
        name: "modelhost_usage_ledger_failed_flushes",
        help: "Ledger writes that failed since start (their rows are kept for the next).",
        registers: [this.registry],
        collect() {
          this.set(ledger().failedFlushes);
        },
      });
    }
  }

  /**
   * Counts every request when its response closes (streams too, which Fastify's onResponse skips),
   * and the refusals of rate limits. To be installed before any route.
   */
  install(app: FastifyInstance): void {
    app.addHook("onRequest", async (request, reply) => {
      const started = performance.now();
      reply.raw.once("close", () => {
        const route = request.routeOptions.url ?? "unmatched";
        const method = request.method;
        this.#requestSeconds.observe({ route, method }, (performance.now() - started) / 1000);
        const name = modelOfBody(request.body);
        const model = name !== undefined && this.#knownModels.has(name) ? name : "";
        this.#requests.inc({ route, method, status: String(reply.raw.statusCode), model });
      });
    });
    app.addHook("onError", async (_request, _reply, error) => {
      if (!isServerError(error)) return;
      const kind =
        error.code === "rate_limit_exceeded"
          ? (error.details.limit ?? error.details.limitKind ?? "unknown")
          : error.code === "tokens_limit_reached"
            ? "max_input_tokens"
            : error.code === "limiter_unavailable"
              ? "limiter_unavailable"
              : undefined;
      if (kind) this.#refusals.inc({ kind });
    });
  }

  /**
   * The engine as routes see it: every generation and embedding is measured here, whatever
   * protocol asked. The calls it measures are overridden; every other method passes through.
   */
  observe(engine: Engine): Engine {
    const measured: Partial<Engine> = {
      chat: async (request, options) => {
        const started = performance.now();
        const stream = await engine.chat(request, options);
        this.#knownModels.add(request.model);
        return new ObservedStream(stream, request.model, started, options, this);
      },
      // n choices of one prompt: each is a generation; the prompt is counted once, with the first.
      chatChoices: async (request, options) => {
        const started = performance.now();
        const streams = await engine.chatChoices(request, options);
        this.#knownModels.add(request.model);
        return streams.map(
          (stream, index) => new ObservedStream(stream, request.model, started, options, this, { index, countsPrompt: index === 0 }),
        );
      },
      embed: async (request, options) => {
        const result = await engine.embed(request, options);
        this.#knownModels.add(request.model);
        this.#promptTokens.inc({ model: request.model }, result.promptTokens);
        return result;
      },
      load: async (name, options) => {
        const loaded = await engine.load(name, options);
        this.#knownModels.add(name);
        return loaded;
      },
    };
    return decorateEngine(engine, measured);
  }

  /** Called by ObservedStream as a generation goes. */
  recordFirstPiece(model: string, seconds: number): void {
    this.#ttft.observe({ model }, seconds);
  }

  recordGap(model: string, seconds: number): void {
    this.#itl.observe({ model }, seconds);
  }

  recordEnd(
    model: string,
    finishReason: string,
    usage?: { promptTokens: number; completionTokens: number },
    tokensPerSecond?: number,
  ): void {
    this.#generations.inc({ model, finish_reason: finishReason });
    if (usage) {
      this.#promptTokens.inc({ model }, usage.promptTokens);
      this.#completionTokens.inc({ model }, usage.completionTokens);
    }
    if (tokensPerSecond !== undefined) this.#tokensPerSecond.observe({ model }, tokensPerSecond);
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }
}

/**
 * A generation as the engine runs it, measured on its way to the route: time to the first piece,
 * the gaps between pieces, and at its end the tokens, speed and finish reason, with one summary
 * line in the request's log. The one place every protocol's generations pass through.
 */
class ObservedStream implements ChatStream {
  readonly #inner: ChatStream;
  readonly #model: string;
  readonly #started: number;
  readonly #origin: RequestOptions["origin"];
  readonly #signal: AbortSignal;
  readonly #metrics: ServerMetrics;
  #firstAt: number | undefined;
  #lastAt: number | undefined;
  #ended = false;
  readonly #choice: { index: number; countsPrompt: boolean } | undefined;

  /** `choice`: one of a request's n choices (only the first counts the shared prompt). */
  constructor(
    inner: ChatStream,
    model: string,
    started: number,
    options: RequestOptions,
    metrics: ServerMetrics,
    choice?: { index: number; countsPrompt: boolean },
  ) {
    this.#inner = inner;
    this.#choice = choice;
    this.#model = model;
    this.#started = started;
    this.#origin = options.origin;
    this.#signal = options.signal;
    this.#metrics = metrics;
  }

  /** The prompt's size, as the engine's stream knows it (Anthropic's message_start reports it). */
  get promptTokens(): number | undefined {
    return this.#inner.promptTokens;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ChatEvent, void>> {
    let result: IteratorResult<ChatEvent, void>;
    try {
      result = await this.#inner.next();
    } catch (error) {
      // Aborted (the client left, or shutdown cut it): a cancellation, not a failure.
      if (this.#signal.aborted) this.#end("cancelled");
      else this.#end("error", { err: error });
      throw error;
    }
    if (result.done) {
      // The stream was closed before its `done` event (the client left, or it was cut).
      this.#end("cancelled");
      return result;
    }
    const event = result.value;
    const now = performance.now();
    if (event.type === "done") {
      this.#done(event, now);
    } else {
      if (this.#firstAt === undefined) {
        this.#firstAt = now;
        this.#metrics.recordFirstPiece(this.#model, (now - this.#started) / 1000);
      } else if (this.#lastAt !== undefined) {
        this.#metrics.recordGap(this.#model, (now - this.#lastAt) / 1000);
      }
      this.#lastAt = now;
    }
    return result;
  }

  async return(): Promise<IteratorResult<ChatEvent, void>> {
    try {
      return await this.#inner.return();
    } finally {
      this.#end("cancelled");
    }
  }

  #done(event: Extract<ChatEvent, { type: "done" }>, now: number): void {
    if (this.#ended) return;
    this.#ended = true;
    const { usage, timings, finishReason } = event;
    // Tokens after the first, over the time they took (the first one's time is the prompt's).
    const tokensPerSecond =
      usage.completionTokens > 1 && timings.generationMs > 0 ? (usage.completionTokens - 1) / (timings.generationMs / 1000) : undefined;
    const counted = this.#choice?.countsPrompt === false ? { ...usage, promptTokens: 0 } : usage;
    this.#metrics.recordEnd(this.#model, finishReason, counted, tokensPerSecond);
    const ttftMs = this.#firstAt === undefined ? undefined : Math.round(this.#firstAt - this.#started);
    this.#origin?.log(
      {
        model: this.#model,
        ...(this.#choice === undefined ? {} : { choice: this.#choice.index }),
        promptTokens: usage.promptTokens,
        cachedTokens: usage.cachedTokens,
        completionTokens: usage.completionTokens,
        ...(ttftMs === undefined ? {} : { ttftMs }),
        ...(tokensPerSecond === undefined ? {} : { tokensPerSecond: Math.round(tokensPerSecond * 10) / 10 }),
        ...(event.speculation ? { draftTokens: event.speculation.drafted, draftTokensAccepted: event.speculation.accepted } : {}),
        finishReason,
        totalMs: Math.round(now - this.#started),
        ...(this.#origin.account === undefined ? {} : { account: this.#origin.account }),
      },
      "generation finished",
    );
  }

  #end(how: "cancelled" | "error", fields: object = {}): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#metrics.recordEnd(this.#model, how);
    this.#origin?.log(
      {
        model: this.#model,
        finishReason: how,
        totalMs: Math.round(performance.now() - this.#started),
        ...(this.#origin.account === undefined ? {} : { account: this.#origin.account }),
        ...fields,
      },
      `generation ${how}`,
    );
  }
}
