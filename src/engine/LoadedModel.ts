import {
  LlamaGrammar,
  LlamaText,
  resolveChatWrapper,
  type ChatModelFunctions,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";
import type { ChatRequest, ToolDefinition } from "../core/ChatRequest.js";
import type { EmbedInput, EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { AdmissionTicket, ChatOptions } from "../core/Engine.js";
import type { LoadedModelStatus, ModelInfo } from "../core/ModelInfo.js";
import { ServerError } from "../core/ServerError.js";
import { DecodeBarrier } from "./DecodeBarrier.js";
import { SequencePool } from "./SequencePool.js";
import { streamCompletion, type ToolCallPlan } from "./streamCompletion.js";
import { toChatHistory } from "./toChatHistory.js";
import { callDelimitersOf, callOpenersOf, toolCallSyntaxOf, type ToolCallSyntax } from "./tools/ToolCallSyntax.js";
import { responseFormatGrammar, toolCallGrammar } from "./tools/toolCallGrammar.js";

export interface ModelRuntimeOptions {
  /** Context length per sequence; capped at the model's trained length. */
  contextSize: number;
  /** Sequences decoded together. */
  parallel: number;
  batchSize: number;
  threads: number;
  maxQueue: number;
}

interface RenderedPrompt {
  text: LlamaText;
  tokens: Token[];
  /** Control tokens that end the turn in this template (e.g. `<|im_end|>`), besides end-of-generation ones. */
  stopTokens: ReadonlySet<Token>;
  /** Template stop triggers that are plain text (e.g. "\n\n### Human:" in fallback templates). */
  stopTexts: string[];
}

/**
 * One model resident in memory: its weights, one context whose sequences decode together in
 * batches, a FIFO queue for requests beyond those sequences, and the model's own chat template.
 */
export class LoadedModel {
  readonly info: ModelInfo;
  readonly contextSize: number;
  readonly #model: LlamaModel;
  readonly #pool: SequencePool<LlamaContextSequence>;
  /** Created on the first embeddings request; one request at a time, the others wait in line. */
  #embedding: Promise<SequencePool<LlamaEmbeddingContext>> | undefined;
  #embeddingPool: SequencePool<LlamaEmbeddingContext> | undefined;
  readonly #chatWrapper: ChatWrapper;
  readonly #toolSyntax: ToolCallSyntax;
  readonly #options: ModelRuntimeOptions;
  readonly #barrier = new DecodeBarrier();
  #expiresAt: number | null = null;
  #disposed = false;
  #onActivity: () => void = () => {};
  #embeddingLoads = 0;

  /** `context` is absent for models that only embed; disposing the model disposes it. */
  private constructor(info: ModelInfo, model: LlamaModel, context: LlamaContext | undefined, options: ModelRuntimeOptions) {
    this.info = info;
    this.#model = model;
    this.#options = options;
    this.contextSize = context?.contextSize ?? Math.min(options.contextSize, model.trainContextSize);
    const sequences = context ? Array.from({ length: options.parallel }, () => context.getSequence()) : [];
    this.#pool = new SequencePool(sequences, options.maxQueue);
    // The model's own template from its GGUF metadata (rendered with Jinja), a known family's
    // wrapper when the template is recognised, or a general fallback when the file has none.
    this.#chatWrapper = resolveChatWrapper(model, { warningLogs: false });
    this.#toolSyntax = toolCallSyntaxOf(this.#chatWrapper);
  }

  static async load(llama: Llama, info: ModelInfo, options: ModelRuntimeOptions): Promise<LoadedModel> {
    const canChat = info.capabilities.includes("chat");
    // A decoder model declares no pooling; mean pooling over its hidden states makes it embed, as
    // llama-server's `--pooling mean` does. Pooling applies to embedding contexts only, not to chat.
    const metadataOverrides = canChat && info.poolingType === undefined ? { [info.architecture]: { pooling_type: MEAN_POOLING } } : undefined;
    const model = await llama.loadModel({ modelPath: info.path, ...(metadataOverrides ? { metadataOverrides: metadataOverrides as never } : {}) });
    try {
      if (!canChat) return new LoadedModel(info, model, undefined, options);
      const contextSize = Math.min(options.contextSize, model.trainContextSize);
      const context = await model.createContext({
        sequences: options.parallel,
        contextSize,
        batchSize: options.batchSize,
        threads: { ideal: options.threads, min: options.threads },
        failedCreationRemedy: false,
        // As llama-server does: llama.cpp enables flash attention where the backend supports it.
        // On this CPU it made batched decoding of 4 streams ~10% faster.
        flashAttention: "auto",
      });
      return new LoadedModel(info, model, context, options);
    } catch (error) {
      await model.dispose();
      throw error;
    }
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  get idle(): boolean {
    return this.#pool.idle && (this.#embeddingPool?.idle ?? true) && this.#embeddingLoads === 0;
  }

  /** Notified whenever a request starts, ends or queues, so the owner can schedule unloading. */
  set onActivity(listener: () => void) {
    this.#onActivity = listener;
    this.#pool.onChange = listener;
    if (this.#embeddingPool) this.#embeddingPool.onChange = listener;
  }

  set expiresAt(value: number | null) {
    this.#expiresAt = value;
  }

  status(): LoadedModelStatus {
    const embedding = this.#embeddingPool;
    return {
      id: this.info.id,
      active: this.#pool.active + (embedding?.active ?? 0),
      queued: this.#pool.queued + (embedding?.queued ?? 0),
      expiresAt: this.#expiresAt,
    };
  }

  /** Embeds each input in turn on the model's embedding context; vectors come back L2-normalised. */
  async embed(request: EmbedRequest, { signal, admit }: ChatOptions): Promise<EmbedResult> {
    const size = this.#model.embeddingVectorSize;
    if (request.dimensions !== undefined && request.dimensions > size) {
      throw new ServerError("invalid_request", {
        param: "dimensions",
        message: `Invalid value for 'dimensions': ${request.dimensions} is more than this model's ${size} dimensions.`,
      });
    }
    const inputs = request.inputs.map((input, index) => this.#embeddingTokens(input, index));
    const pool = await this.#embeddingContexts();
    const context = await pool.acquire(signal);
    let ticket: AdmissionTicket | undefined;
    let promptTokens = 0;
    try {
      const prepared = inputs.map((tokens, index) => {
        const length = context.calculateInputLength(tokens);
        if (length < this.contextSize) return { tokens, length };
        return { tokens: this.#cutToContext(tokens, length, index, request.truncate), length: this.contextSize - 1 };
      });
      ticket = await admit?.({ promptTokens: prepared.reduce((sum, input) => sum + input.length, 0), maxOutputTokens: 0 });
      const vectors: Float32Array[] = [];
      for (const { tokens, length } of prepared) {
        signal.throwIfAborted();
        const { vector } = await context.getEmbeddingFor(tokens);
        promptTokens += length;
        vectors.push(unitVector(vector, request.dimensions ?? size));
      }
      return { vectors, promptTokens };
    } finally {
      pool.release(context);
      ticket?.settle({ promptTokens, completionTokens: 0 });
    }
  }

  #embeddingTokens(input: EmbedInput, index: number): Token[] {
    if (typeof input === "string") return this.#model.tokenize(input);
    this.#checkTokenIds(input, `input[${index}]`);
    return input as Token[];
  }

  /** An input longer than the context is refused unless the caller asked to truncate it. */
  #cutToContext(tokens: Token[], length: number, index: number, truncate: boolean): Token[] {
    if (!truncate) {
      throw new ServerError("invalid_request", {
        param: `input[${index}]`,
        message: `Invalid value for 'input[${index}]': it is ${length} tokens long, but this model's context holds ${this.contextSize - 1}. Shorten it, or send "truncate": true to cut it.`,
      });
    }
    // The special tokens the model adds around an input count too.
    return tokens.slice(0, Math.max(0, tokens.length - (length - (this.contextSize - 1))));
  }

  #embeddingContexts(): Promise<SequencePool<LlamaEmbeddingContext>> {
    this.#embedding ??= (async () => {
      this.#embeddingLoads++;
      try {
        // A non-causal model (BERT) must see a whole input in one batch.
        const context = await this.#model.createEmbeddingContext({
          contextSize: this.contextSize,
          batchSize: this.contextSize,
          threads: this.#options.threads,
        });
        const pool = new SequencePool([context], this.#options.maxQueue);
        pool.onChange = this.#onActivity;
        this.#embeddingPool = pool;
        return pool;
      } finally {
        this.#embeddingLoads--;
      }
    })();
    this.#embedding.catch(() => {
      this.#embedding = undefined;
    });
    return this.#embedding;
  }

  async chat(request: ChatRequest, { signal, admit }: ChatOptions): Promise<ChatStream> {
    this.#checkTokenIds(request.sampling.logitBias.keys(), "logit_bias");
    // tool_choice "none" renders no tools: the model is not told of functions it may not call.
    const tools = request.toolChoice.type === "none" ? [] : request.tools;
    const prompt = this.#render(request, tools);
    const toolPlan = tools.length > 0 ? this.#toolPlan(request, tools, prompt.text) : undefined;
    const textFormat = responseFormatGrammar(request.responseFormat);
    const textGrammar = textFormat === undefined ? undefined : new LlamaGrammar(this.#model.llama, { grammar: textFormat });
    if (prompt.tokens.length >= this.contextSize) {
      throw new ServerError("context_length_exceeded", {
        param: "messages",
        message: `This model's maximum context length is ${this.contextSize} tokens. However, your messages resulted in ${prompt.tokens.length} tokens. Please reduce the length of the messages.`,
      });
    }
    const tokens = prompt.tokens;
    const maxOutputTokens = Math.min(request.maxTokens ?? Infinity, this.contextSize - tokens.length);
    const ticket = await admit?.({ promptTokens: tokens.length, maxOutputTokens });
    let sequence: LlamaContextSequence;
    try {
      // Prefer the free sequence whose cache already holds the longest start of this prompt: the
      // conversation so far, when a client sends its next turn.
      sequence = await this.#pool.acquire(signal, (candidate) => candidate.compareContextTokens(tokens).firstDifferentIndex);
    } catch (error) {
      ticket?.settle({ promptTokens: 0, completionTokens: 0 });
      throw error;
    }
    try {
      // Keep that shared start and drop the rest; at least the last prompt token is evaluated
      // again, since its logits give the first new token.
      await sequence.adaptStateToTokens(tokens.slice(0, -1), false);
    } catch (error) {
      this.#pool.release(sequence);
      ticket?.settle({ promptTokens: 0, completionTokens: 0 });
      throw error;
    }
    const progress = { completionTokens: 0 };
    const events = streamCompletion({
      model: this.#model,
      sequence,
      promptTokens: tokens,
      cachedTokens: sequence.nextTokenIndex,
      maxTokens: Math.min(maxOutputTokens, ticket?.maxOutputTokens ?? Infinity),
      stop: [...request.stop, ...prompt.stopTexts],
      stopTokens: prompt.stopTokens,
      sampling: request.sampling,
      textGrammar,
      tools: toolPlan,
      promptChunkSize: this.#options.batchSize,
      barrier: this.#barrier,
      progress,
      signal,
    });
    return new SequenceLease(events, () => {
      this.#pool.release(sequence);
      // What was really used, also when the client left mid-stream.
      ticket?.settle({ promptTokens: tokens.length, completionTokens: progress.completionTokens });
    });
  }

  /** Renders the conversation (and the tools the model may call) with its chat template, and tokenizes it. */
  #render(request: ChatRequest, tools: readonly ToolDefinition[]): RenderedPrompt {
    const state = this.#chatWrapper.generateContextState({
      chatHistory: toChatHistory(request.messages),
      availableFunctions: tools.length > 0 ? toChatModelFunctions(tools) : undefined,
    });
    const stopTokens = new Set<Token>();
    const stopTexts: string[] = [];
    for (const trigger of state.stopGenerationTriggers) {
      const [first] = trigger.values;
      if (typeof first === "string") {
        // Plain text, such as "\n\n### Human:" in templates of the fallback kind.
        stopTexts.push(trigger.values.map((value) => (typeof value === "string" ? value : "")).join(""));
      } else if (first !== undefined) {
        // A trigger that opens with a control token (`<|im_end|>`, EOS) stops at that token.
        const [token] = trigger.tokenize(this.#model.tokenizer);
        if (token !== undefined) stopTokens.add(token);
      }
    }
    return { text: state.contextText, tokens: state.contextText.tokenize(this.#model.tokenizer), stopTokens, stopTexts };
  }

  /** Token ids are the model's own; an id outside its vocabulary is the caller's mistake. */
  #checkTokenIds(tokens: Iterable<number>, param: string): void {
    const size = this.#model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
    for (const token of tokens) {
      if (token >= size) {
        throw new ServerError("invalid_request", {
          param,
          message: `Invalid value for '${param}': token id ${token} is outside this model's vocabulary (ids 0 to ${size - 1}).`,
        });
      }
    }
  }

  #toolPlan(request: ChatRequest, tools: readonly ToolDefinition[], prompt: LlamaText): ToolCallPlan {
    const syntax = this.#toolSyntax;
    const choice = request.toolChoice;
    const named = choice.type === "function" ? choice.name : undefined;
    const delimiters = callDelimitersOf(syntax);
    const grammar = toolCallGrammar({ tools, delimiters, parallel: request.parallelToolCalls, named });
    const opener = LlamaText([syntax.sectionPrefix, syntax.prefix, ...(named === undefined ? [] : [named, syntax.paramsPrefix])]);
    const tokenizer = this.#model.tokenizer;
    return {
      mode: named !== undefined ? { name: named } : choice.type === "required" ? "required" : "auto",
      openers: callOpenersOf(syntax),
      delimiters,
      grammar: new LlamaGrammar(this.#model.llama, { grammar }),
      openCall(content) {
        const before = LlamaText([prompt, content]).tokenize(tokenizer);
        const tokens = LlamaText([prompt, content, opener]).tokenize(tokenizer);
        return { tokens, openerTokens: tokens.length - before.length };
      },
    };
  }

  /** Fails queued requests and frees the weights; requests still decoding end with an error. */
  async dispose(): Promise<void> {
    this.#disposed = true;
    const unloading = new ServerError("overloaded", { retryAfter: 1, message: "The model is being unloaded. Retry shortly." });
    this.#pool.rejectWaiting(unloading);
    this.#embeddingPool?.rejectWaiting(unloading);
    // Disposing the model disposes its contexts (chat and embedding) with it.
    await this.#model.dispose();
  }
}

/**
 * Owns a sequence for the life of one stream and gives it back exactly once: when the stream
 * ends, fails, or is closed by its consumer, even if it was never iterated at all.
 */
class SequenceLease implements AsyncIterableIterator<ChatEvent> {
  readonly #events: AsyncGenerator<ChatEvent, void, undefined>;
  #release: (() => void) | undefined;

  constructor(events: AsyncGenerator<ChatEvent, void, undefined>, release: () => void) {
    this.#events = events;
    this.#release = release;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<ChatEvent, void>> {
    try {
      const result = await this.#events.next();
      if (result.done) this.#end();
      return result;
    } catch (error) {
      this.#end();
      throw error;
    }
  }

  async return(): Promise<IteratorResult<ChatEvent, void>> {
    try {
      await this.#events.return(undefined);
    } finally {
      this.#end();
    }
    return { done: true, value: undefined };
  }

  #end(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}

/** llama.cpp's LLAMA_POOLING_TYPE_MEAN. */
const MEAN_POOLING = 1;

/** The first `dimensions` components, scaled to unit length, so cosine similarity is a dot product. */
function unitVector(vector: readonly number[], dimensions: number): Float32Array {
  const result = Float32Array.from(vector.slice(0, dimensions));
  let norm = 0;
  for (const value of result) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < result.length; i++) result[i]! /= norm;
  return result;
}

function toChatModelFunctions(tools: readonly ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, ChatModelFunctions[string]> = {};
  for (const tool of tools) {
    functions[tool.name] = { description: tool.description, params: tool.parameters as ChatModelFunctions[string]["params"] };
  }
  return functions;
}
