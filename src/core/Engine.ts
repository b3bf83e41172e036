import type { ChatRequest } from "./ChatRequest.js";
import type { ChatStream } from "./ChatEvent.js";
import type { EmbedRequest, EmbedResult } from "./EmbedRequest.js";
import type { EngineStatus, ModelDescription, ModelInfo } from "./ModelInfo.js";
import type { RerankRequest, RerankResult } from "./RerankRequest.js";
import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "./TokenizeRequest.js";

export interface RequestOptions {
  /** Aborting it stops generation at once and frees the request's sequence (or its place in the queue). */
  signal: AbortSignal;
  /**
   * Called once the prompt's size is known, before any token is evaluated; may refuse by throwing
   * (rate limits, per-request caps). The ticket's `settle` is called exactly once with what was
   * really used, when the request ends however it ends.
   */
  admit?: (request: AdmissionRequest) => Promise<AdmissionTicket>;
  /**
   * How long the model stays loaded once idle after this request, in ms: Infinity keeps it, 0
   * unloads it as soon as no request uses it. Absent: the server's --keep-alive.
   */
  keepAliveMs?: number;
  /** The request a call serves, for its observers (the generation's log line, metrics). */
  origin?: RequestOrigin;
}

/** Who a call is for, as the HTTP layer knows it. */
export interface RequestOrigin {
  /** Writes a line to the request's log (it carries the request id). */
  log(fields: object, message: string): void;
  /** The caller's account name, in the hosted profile. */
  account?: string;
}

export interface LoadOptions {
  signal: AbortSignal;
  /** As in RequestOptions: how long the model then stays loaded while idle. */
  keepAliveMs?: number;
}

export interface AdmissionRequest {
  promptTokens: number;
  /** The most the request may generate (its max_tokens, or what the context leaves). */
  maxOutputTokens: number;
}

export interface AdmissionTicket {
  /** The output cap granted, at most the one asked for. */
  maxOutputTokens: number;
  settle(usage: { promptTokens: number; completionTokens: number }): void;
}

/**
 * Runs models. Protocol translators and HTTP routes talk only to this interface, never to llama.cpp.
 */
export interface Engine {
  listModels(): Promise<ModelInfo[]>;
  /** Resolves an id or alias; undefined when no installed model has that name. */
  findModel(name: string): Promise<ModelInfo | undefined>;
  /**
   * Starts a chat completion. Resolves once the request holds a decoding slot and its prompt is
   * evaluated-ready, so errors that need a status code (unknown model, queue full, prompt too long)
   * reject this promise instead of surfacing mid-stream.
   */
  chat(request: ChatRequest, options: RequestOptions): Promise<ChatStream>;
  /**
   * The prompt `request` becomes, rendered exactly as `chat` renders it (chat template, tools),
   * without generating: its tokens as text (special tokens written out), what the model reads, and
   * their count, the `promptTokens` its `chat` would report. Loads the model if it is not
   * resident; takes no decoding slot and evaluates nothing, so it is admitted (as `tokenize` is)
   * as a request that uses no tokens.
   */
  renderPrompt(request: ChatRequest, options: RequestOptions): Promise<PromptPreview>;
  /**
   * Starts `request.n` (1 to 8) completions of one prompt, decoded in parallel on as many
   * sequences, the prompt evaluated once and its cache copied to the others. Resolves, like
   * `chat`, once they hold their sequences, with one stream per choice, in choice order.
   *
   * Why n streams rather than one stream of events tagged with a choice index: every protocol,
   * tool loop and test reads one choice, and only the OpenAI routes read several; they merge the
   * streams themselves, so nothing else learns about choices. Admission is asked once, for the
   * prompt and n × the output cap, and settled once with the prompt and all completions.
   */
  chatChoices(request: ChatRequest, options: RequestOptions): Promise<ChatStream[]>;
  /** Embeds every input of the request; requests to one model take turns on its embedding context. */
  embed(request: EmbedRequest, options: RequestOptions): Promise<EmbedResult>;
  /** Scores each document against the query on a reranking model; requests to one model take turns on its ranking context. */
  rerank(request: RerankRequest, options: RequestOptions): Promise<RerankResult>;
  /** The model's token ids for a text (loading the model if needed); evaluates nothing. */
  tokenize(request: TokenizeRequest, options: RequestOptions): Promise<TokenizeResult>;
  /** The text of token ids of the model's own vocabulary; an id outside it is invalid_request. */
  detokenize(request: DetokenizeRequest, options: RequestOptions): Promise<DetokenizeResult>;
  /** Loads a model if it is not resident and sets its keep-alive; resolves with the ms loading took (0 if resident). */
  load(name: string, options: LoadOptions): Promise<{ model: ModelInfo; loadMs: number }>;
  /** Unloads a model now if idle, else as soon as its last request ends; unknown names are model_not_found. */
  unload(name: string): Promise<ModelInfo>;
  /** A model's GGUF metadata and chat template, read from its file header without loading weights. */
  describeModel(name: string): Promise<ModelDescription | undefined>;
  /** The SHA-256 of a model's file (of its first part, for split models), hex; computed once per file version. */
  modelDigest(model: ModelInfo): Promise<string>;
  status(): EngineStatus;
  close(): Promise<void>;
}

/** A chat request's prompt as the model reads it (Engine.renderPrompt). */
export interface PromptPreview {
  /**
   * The prompt as the chat template rendered it, as transformers renders it (for a model without a
   * Jinja template, the prompt's tokens as text, special tokens written out: `<|im_start|>`…).
   */
  text: string;
  tokenCount: number;
}
