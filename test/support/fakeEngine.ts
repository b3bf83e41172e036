// One fake engine for the tests that need a server but not a model: access control, limits, error
// shapes, headers, the ledger's arithmetic. It implements src/core/Engine.ts honestly: every call
// checks the model and its capability as LlamaEngine does, asks admission (`admit`) and settles the
// ticket exactly once with what was really used, as LoadedModel and SingleBatchRunner do, and stops
// when the request's signal aborts. What it generates is a script the test chooses.
//
// Its tokenizer is byte-level: a token is one UTF-8 byte (ids 0-255), so prompt sizes are the
// byte lengths of the rendered prompt. Generated text is one token per word (with its leading space).
import { createHash } from "node:crypto";
import type { ChatEvent, ChatStream, FinishReason, TokenLogprob } from "../../src/core/ChatEvent.js";
import type { ChatRequest } from "../../src/core/ChatRequest.js";
import { checkRequestSchemas } from "../../src/core/checkRequestSchemas.js";
import type { EmbedRequest, EmbedResult } from "../../src/core/EmbedRequest.js";
import type { AdmissionTicket, Engine, LoadOptions, PromptPreview, RequestOptions } from "../../src/core/Engine.js";
import { zeroCounters, type EngineStatus, type ModelCapability, type ModelDescription, type ModelInfo } from "../../src/core/ModelInfo.js";
import type { RerankRequest, RerankResult } from "../../src/core/RerankRequest.js";
import { ServerError } from "../../src/core/ServerError.js";
import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "../../src/core/TokenizeRequest.js";
import { SequenceLease } from "../../src/engine/SequenceLease.js";

/** What one choice generates. */
export interface FakeReply {
  /** The answer's tokens; a string is split into words (each with the whitespace before it). */
  text?: string | readonly string[];
  /** The thought section's tokens, before the answer. */
  thinking?: string | readonly string[];
  /** Calls after the answer; each call's arguments are one token. */
  toolCalls?: ReadonlyArray<{ name: string; arguments: string }>;
  /** The finish reason of a script that runs to its end (default: "tool_calls" with calls, else "stop"). */
  finishReason?: FinishReason;
  /** Thrown after the script's events instead of its `done`: a decode that failed mid-stream. */
  failure?: Error;
  /** Awaited before the first event: a generation that stays silent until the test lets it go. */
  hold?: Promise<void>;
  /** Milliseconds each token takes (default: a turn of the event loop), so a client can leave mid-stream. */
  tokenMs?: number;
}

export interface FakeModel {
  id: string;
  aliases?: string[];
  /** Default: chat and embeddings, as a decoder model. */
  capabilities?: ModelCapability[];
}

export type FakeCall = "chat" | "renderPrompt" | "embed" | "rerank" | "tokenize" | "detokenize" | "load" | "unload";
/** The calls that can be made to fail (see FakeEngineOptions.failures). */
export type FailingCall = Exclude<FakeCall, "chat" | "unload">;

export interface FakeEngineOptions {
  /** The installed models (a name: a chat model of that id). Default: one chat model, "fake". */
  models?: ReadonlyArray<string | FakeModel>;
  /** Each choice's script, or a function of the request and the choice's index. */
  reply?: FakeReply | ((request: ChatRequest, choice: number) => FakeReply);
  /** Context per sequence, in tokens (bytes): longer prompts are context_length_exceeded. Default 1024. */
  contextSize?: number;
  /** Calls that fail with this error after admission, as an engine whose work crashed would. */
  failures?: Partial<Record<FailingCall, Error>>;
}

/** A chat request as the protocols hand it to an engine, with their defaults, for tests that call an engine directly. */
export function chatRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    model: "fake",
    messages: [{ role: "user", content: "hi" }],
    stop: [],
    sampling: { temperature: 0, topP: 1, presencePenalty: 0, frequencyPenalty: 0, logitBias: new Map() },
    tools: [],
    toolChoice: { type: "auto" },
    parallelToolCalls: true,
    responseFormat: { type: "text" },
    ...overrides,
  };
}

const DEFAULT_REPLY: FakeReply = { text: "Hello from the fake engine." };
const EMBEDDING_LENGTH = 8;
const BYTES = new TextEncoder();

export class FakeEngine implements Engine {
  /** Every call made, in order (before any check): what the engine was asked to do. */
  readonly calls: FakeCall[] = [];
  readonly #models: ModelInfo[];
  readonly #reply: NonNullable<FakeEngineOptions["reply"]>;
  readonly #contextSize: number;
  readonly #failures: NonNullable<FakeEngineOptions["failures"]>;
  /** Loaded models by id, with their requests in flight. */
  readonly #loaded = new Map<string, { active: number; keepAliveMs: number }>();
  readonly #counters = zeroCounters();
  #closed = false;

  constructor(options: FakeEngineOptions = {}) {
    this.#models = (options.models ?? ["fake"]).map((model) => modelInfo(typeof model === "string" ? { id: model } : model));
    this.#reply = options.reply ?? DEFAULT_REPLY;
    this.#contextSize = options.contextSize ?? 1024;
    this.#failures = options.failures ?? {};
  }

  async listModels(): Promise<ModelInfo[]> {
    return [...this.#models];
  }

  async findModel(name: string): Promise<ModelInfo | undefined> {
    return this.#models.find((model) => model.id === name || model.aliases.includes(name));
  }

  async chat(request: ChatRequest, options: RequestOptions): Promise<ChatStream> {
    const [stream] = await this.chatChoices({ ...request, n: 1 }, options);
    return stream!;
  }

  async chatChoices(request: ChatRequest, options: RequestOptions): Promise<ChatStream[]> {
    this.calls.push("chat");
    checkRequestSchemas(request);
    const info = await this.#find(request.model, "chat");
    const { signal, admit } = options;
    signal.throwIfAborted();
    const n = request.n ?? 1;
    const prompt = this.#promptTokens(request);
    if (prompt >= this.#contextSize) {
      throw new ServerError("context_length_exceeded", {
        param: request.prompt ? "prompt" : "messages",
        message: `This model's maximum context length is ${this.#contextSize} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
      });
    }
    const maxOutputTokens = Math.min(request.maxTokens ?? Infinity, this.#contextSize - prompt);
    const ticket = await admit?.({ promptTokens: prompt, maxOutputTokens: maxOutputTokens * n });
    const perChoiceCap = Math.min(maxOutputTokens, Math.floor((ticket?.maxOutputTokens ?? Infinity) / n));
    const done = this.#use(info.id, options.keepAliveMs);
    this.#counters.promptEvaluations++;
    this.#counters.promptTokensEvaluated += prompt;
    this.#counters.promptCopies += n - 1;
    const generated = Array.from({ length: n }, () => 0);
    let open = n;
    return generated.map((_, choice) => {
      const script = typeof this.#reply === "function" ? this.#reply(request, choice) : this.#reply;
      const events = generate(script, { request, prompt, cap: perChoiceCap, signal, onToken: () => generated[choice]!++ });
      const release = () => {
        if (--open > 0) return;
        done();
        // What was really used, also when the client left mid-stream: the prompt once, the completions summed.
        ticket?.settle({ promptTokens: prompt, completionTokens: generated.reduce((sum, each) => sum + each, 0) });
      };
      return new SequenceLease(events, release, signal, prompt);
    });
  }

  async renderPrompt(request: ChatRequest, options: RequestOptions): Promise<PromptPreview> {
    this.calls.push("renderPrompt");
    checkRequestSchemas(request);
    await this.#find(request.model, "chat");
    return this.#withoutTokens("renderPrompt", options, () => ({
      text: this.#promptText(request),
      tokenCount: this.#promptTokens(request),
    }));
  }

  async embed(request: EmbedRequest, options: RequestOptions): Promise<EmbedResult> {
    this.calls.push("embed");
    const info = await this.#find(request.model, "embeddings");
    const inputs = request.inputs.map((input, index) => {
      const tokens = typeof input === "string" ? [...BYTES.encode(input)] : [...input];
      if (tokens.length <= this.#contextSize) return tokens;
      if (request.truncate) return tokens.slice(0, this.#contextSize);
      throw new ServerError("context_length_exceeded", {
        param: `input[${index}]`,
        message: `Input ${index} is ${tokens.length} tokens, longer than the model's context of ${this.#contextSize}.`,
      });
    });
    const vectors = await this.#evaluateEach("embed", info, options, inputs, (tokens) => embedding(tokens, request));
    return { vectors, promptTokens: inputs.reduce((sum, tokens) => sum + tokens.length, 0), loadMs: 0 };
  }

  async rerank(request: RerankRequest, options: RequestOptions): Promise<RerankResult> {
    this.calls.push("rerank");
    const info = await this.#find(request.model, "rerank");
    const query = BYTES.encode(request.query).length;
    const inputs = request.documents.map((document) => ({ document, tokens: query + BYTES.encode(document).length }));
    const scores = await this.#evaluateEach("rerank", info, options, inputs, ({ document }) => relevance(request.query, document));
    return { scores, promptTokens: inputs.reduce((sum, input) => sum + input.tokens, 0), loadMs: 0 };
  }

  async tokenize(request: TokenizeRequest, options: RequestOptions): Promise<TokenizeResult> {
    this.calls.push("tokenize");
    await this.#find(request.model);
    // The fake vocabulary has no special tokens: addSpecial and parseSpecial change nothing.
    return this.#withoutTokens("tokenize", options, () => {
      const tokens = [...BYTES.encode(request.content)];
      return { tokens, ...(request.withPieces ? { pieces: tokens.map((token) => [token]) } : {}) };
    });
  }

  async detokenize(request: DetokenizeRequest, options: RequestOptions): Promise<DetokenizeResult> {
    this.calls.push("detokenize");
    await this.#find(request.model);
    const invalid = request.tokens.find((token) => !Number.isInteger(token) || token < 0 || token > 255);
    if (invalid !== undefined) {
      throw new ServerError("invalid_request", {
        param: "tokens",
        message: `Token id ${invalid} is not in the model's vocabulary (0-255).`,
      });
    }
    return this.#withoutTokens("detokenize", options, () => ({ content: Buffer.from(request.tokens).toString("utf8") }));
  }

  async load(name: string, options: LoadOptions): Promise<{ model: ModelInfo; loadMs: number }> {
    this.calls.push("load");
    const info = await this.#find(name);
    options.signal.throwIfAborted();
    this.#fail("load");
    const resident = this.#loaded.has(info.id);
    this.#use(info.id, options.keepAliveMs)();
    return { model: info, loadMs: resident ? 0 : 1 };
  }

  async unload(name: string): Promise<ModelInfo> {
    this.calls.push("unload");
    const info = await this.#find(name);
    const resident = this.#loaded.get(info.id);
    if (resident && resident.active === 0) this.#loaded.delete(info.id);
    else if (resident) resident.keepAliveMs = 0;
    return info;
  }

  async describeModel(name: string): Promise<ModelDescription | undefined> {
    const info = await this.findModel(name);
    if (!info) return undefined;
    return { info, metadata: { "general.architecture": info.architecture, "general.name": info.id }, thinks: false, tools: true };
  }

  async modelDigest(model: ModelInfo): Promise<string> {
    return createHash("sha256").update(model.path).digest("hex");
  }

  status(): EngineStatus {
    const loaded = [...this.#loaded].map(([id, { active, keepAliveMs }]) => ({
      id,
      active,
      queued: 0,
      expiresAt: active > 0 ? null : keepAliveMs === Infinity ? null : Date.now() + keepAliveMs,
      keepAliveMs,
      contextSize: this.#contextSize,
      loadMs: 1,
    }));
    return { ready: !this.#closed, backend: "fake", loaded, counters: { ...this.#counters }, promptCacheBytes: 0 };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#loaded.clear();
  }

  /** As LlamaEngine's: an unknown name is model_not_found; a model without the capability, the caller's mistake. */
  async #find(name: string, capability?: ModelCapability): Promise<ModelInfo> {
    if (this.#closed) throw new ServerError("engine_unavailable", { message: "The server is shutting down." });
    const info = await this.findModel(name);
    if (!info) throw new ServerError("model_not_found", { model: name, param: "model" });
    if (capability !== undefined && !info.capabilities.includes(capability)) {
      throw new ServerError("invalid_request", { param: "model", message: `The model \`${name}\` cannot serve ${capability}.` });
    }
    return info;
  }

  /** Marks the model loaded and one more request on it; the function returned ends that request. */
  #use(id: string, keepAliveMs = 5 * 60_000): () => void {
    const resident = this.#loaded.get(id) ?? { active: 0, keepAliveMs };
    resident.active++;
    resident.keepAliveMs = keepAliveMs;
    this.#loaded.set(id, resident);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      resident.active--;
      if (resident.active === 0 && resident.keepAliveMs === 0) this.#loaded.delete(id);
    };
  }

  #fail(call: FailingCall): void {
    const failure = this.#failures[call];
    if (failure) throw failure;
  }

  /** As LoadedModel's: work that evaluates nothing, admitted as a request that uses no tokens. */
  async #withoutTokens<T>(call: "renderPrompt" | "tokenize" | "detokenize", { admit }: RequestOptions, work: () => T): Promise<T> {
    const ticket = await admit?.({ promptTokens: 0, maxOutputTokens: 0 });
    try {
      this.#fail(call);
      return work();
    } finally {
      ticket?.settle({ promptTokens: 0, completionTokens: 0 });
    }
  }

  /** As SingleBatchRunner's: admitted for all the inputs' tokens, settled with those of the inputs evaluated. */
  async #evaluateEach<Input extends readonly number[] | { tokens: number }, Output>(
    call: "embed" | "rerank",
    info: ModelInfo,
    { signal, admit, keepAliveMs }: RequestOptions,
    inputs: readonly Input[],
    evaluate: (input: Input) => Output,
  ): Promise<Output[]> {
    const lengthOf = (input: Input) => ("tokens" in input ? input.tokens : input.length);
    signal.throwIfAborted();
    const done = this.#use(info.id, keepAliveMs);
    let ticket: AdmissionTicket | undefined;
    let promptTokens = 0;
    try {
      ticket = await admit?.({ promptTokens: inputs.reduce((sum, input) => sum + lengthOf(input), 0), maxOutputTokens: 0 });
      this.#fail(call);
      const outputs: Output[] = [];
      for (const input of inputs) {
        signal.throwIfAborted();
        outputs.push(evaluate(input));
        promptTokens += lengthOf(input);
        // A turn of the event loop per input, so an abort can land between two.
        await new Promise((resolve) => setImmediate(resolve));
      }
      return outputs;
    } finally {
      done();
      ticket?.settle({ promptTokens, completionTokens: 0 });
    }
  }

  /** The prompt rendered by a plain template (`role: content` lines, the tools' JSON, the reply's opening), in bytes. */
  #promptTokens(request: ChatRequest): number {
    const override = request.prompt;
    if (override?.type === "tokens") return override.tokens.length;
    if (override?.type === "infill") return BYTES.encode(override.prefix + override.suffix).length + 3;
    return BYTES.encode(this.#promptText(request)).length;
  }

  /** The fake's "template": one line per message, the tools as JSON, then the assistant's turn (a raw prompt as is). */
  #promptText(request: ChatRequest): string {
    const override = request.prompt;
    if (override?.type === "raw") return override.text;
    if (override?.type === "infill") return override.prefix + override.suffix;
    if (override?.type === "tokens") return override.tokens.join(" ");
    const tools = request.toolChoice.type === "none" ? [] : request.tools;
    const lines = request.messages.map((message) => `${message.role}: ${message.content}\n`);
    const toolText = tools.length > 0 ? `tools: ${JSON.stringify(tools)}\n` : "";
    return toolText + lines.join("") + "assistant: ";
  }
}

function modelInfo(model: FakeModel): ModelInfo {
  const capabilities = model.capabilities ?? ["chat", "embeddings"];
  return {
    id: model.id,
    aliases: model.aliases ?? [],
    path: `/models/${model.id}.gguf`,
    sizeBytes: 1,
    created: 0,
    architecture: capabilities.includes("chat") ? "llama" : "bert",
    embeddingLength: EMBEDDING_LENGTH,
    hasChatTemplate: capabilities.includes("chat"),
    fillInTheMiddle: false,
    capabilities,
    ...(capabilities.includes("rerank") ? { poolingType: 4 } : {}),
  };
}

/** A string's tokens: its words, each with the whitespace before it. */
function tokensOf(text: string | readonly string[] | undefined): readonly string[] {
  if (text === undefined) return [];
  return typeof text === "string" ? (text.match(/\s*\S+|\s+$/g) ?? []) : text;
}

interface Generation {
  request: ChatRequest;
  prompt: number;
  /** The most tokens this choice may generate. */
  cap: number;
  signal: AbortSignal;
  onToken(): void;
}

/** The script's events, cut at the output cap ("length") or at a stop sequence ("stop"), ended by `done`. */
async function* generate(script: FakeReply, { request, prompt, cap, signal, onToken }: Generation): AsyncGenerator<ChatEvent, void> {
  const started = performance.now();
  if (script.hold) await abortable(script.hold, signal);
  let tokens = 0;
  let finishReason: FinishReason | undefined;
  let stopSequence: string | undefined;
  /** Takes a token if the cap leaves room; false once it does not. */
  const take = async () => {
    await new Promise((resolve) => (script.tokenMs ? setTimeout(resolve, script.tokenMs) : setImmediate(resolve)));
    signal.throwIfAborted();
    if (tokens >= cap) {
      finishReason = "length";
      return false;
    }
    tokens++;
    onToken();
    return true;
  };
  for (const text of tokensOf(script.thinking)) {
    if (!(await take())) break;
    yield { type: "thinking", text };
  }
  let answer = "";
  for (const text of finishReason ? [] : tokensOf(script.text)) {
    if (!(await take())) break;
    const stop = request.stop.map((stop) => ({ stop, at: (answer + text).indexOf(stop) })).find(({ at }) => at >= 0);
    if (stop) {
      const before = (answer + text).slice(answer.length, stop.at);
      if (before) yield { type: "text", text: before, ...logprobsOf(request, before) };
      finishReason = "stop";
      stopSequence = stop.stop;
      break;
    }
    answer += text;
    yield { type: "text", text, ...logprobsOf(request, text) };
  }
  for (const [index, call] of (finishReason ? [] : (script.toolCalls ?? [])).entries()) {
    if (!(await take())) break;
    yield { type: "tool_call_start", index, name: call.name };
    yield { type: "tool_call_arguments", index, text: call.arguments };
  }
  if (script.failure) throw script.failure;
  const generationMs = performance.now() - started;
  yield {
    type: "done",
    finishReason: finishReason ?? script.finishReason ?? (script.toolCalls?.length ? "tool_calls" : "stop"),
    usage: { promptTokens: prompt, cachedTokens: 0, completionTokens: tokens },
    timings: { loadMs: 0, promptMs: 0, generationMs },
    ...(stopSequence !== undefined ? { stopSequence } : {}),
  };
}

/** When logprobs were asked for: the text's one token, certain, with no alternatives but itself. */
function logprobsOf(request: ChatRequest, text: string): { logprobs?: TokenLogprob[] } {
  if (!request.logprobs) return {};
  const bytes = [...BYTES.encode(text)];
  const token = { token: text, bytes, logprob: 0 };
  return { logprobs: [{ ...token, top: request.logprobs.top > 0 ? [token] : [] }] };
}

/** Resolves with `promise`, or rejects with the signal's reason once it aborts. */
function abortable(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** A deterministic vector of the tokens (their bytes folded into the components), unit length unless asked otherwise. */
function embedding(tokens: readonly number[], request: EmbedRequest): Float32Array {
  const raw = Array.from({ length: EMBEDDING_LENGTH }, (_, component) => 1 + component / EMBEDDING_LENGTH);
  tokens.forEach((token, position) => (raw[position % EMBEDDING_LENGTH]! += token / 255));
  const kept = raw.slice(0, request.dimensions ?? EMBEDDING_LENGTH);
  const scale = request.normalize === false && request.dimensions === undefined ? 1 : 1 / Math.hypot(...kept);
  return Float32Array.from(kept, (value) => value * scale);
}

/** The share of the query's words the document holds, through a sigmoid: between 0 and 1. */
function relevance(query: string, document: string): number {
  const words = (text: string) => new Set(text.toLowerCase().match(/\w+/g) ?? []);
  const held = words(document);
  const asked = [...words(query)];
  const shared = asked.filter((word) => held.has(word)).length / Math.max(asked.length, 1);
  return 1 / (1 + Math.exp(-(4 * shared - 2)));
}
