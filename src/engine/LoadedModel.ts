import { LlamaGrammar, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel } from "node-llama-cpp";
import type { ChatStream } from "../core/ChatEvent.js";
import type { ChatRequest } from "../core/ChatRequest.js";
import type { EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { RequestOptions } from "../core/Engine.js";
import type { LoadedModelStatus, ModelInfo } from "../core/ModelInfo.js";
import { ServerError } from "../core/ServerError.js";
import { ChatPromptRenderer } from "./ChatPromptRenderer.js";
import { checkTokenIds } from "./checkTokenIds.js";
import { DecodeBarrier } from "./DecodeBarrier.js";
import { EmbeddingRunner } from "./EmbeddingRunner.js";
import { SequenceLease } from "./SequenceLease.js";
import { SlotPool } from "./SlotPool.js";
import { streamCompletion } from "./streamCompletion.js";
import { responseFormatGrammar } from "./tools/toolCallGrammar.js";

export interface ModelRuntimeOptions {
  /** Context length per sequence; capped at the model's trained length. */
  contextSize: number;
  /** Sequences decoded together. */
  parallel: number;
  batchSize: number;
  threads: number;
  maxQueue: number;
}

/**
 * One model resident in memory: its weights, one context whose sequences decode together in
 * batches, a FIFO queue for requests beyond those sequences, its chat template, and its
 * embeddings.
 */
export class LoadedModel {
  readonly info: ModelInfo;
  readonly contextSize: number;
  readonly #model: LlamaModel;
  readonly #pool: SlotPool<LlamaContextSequence>;
  readonly #prompts: ChatPromptRenderer;
  readonly #embeddings: EmbeddingRunner;
  readonly #options: ModelRuntimeOptions;
  readonly #barrier = new DecodeBarrier();
  #expiresAt: number | null = null;
  #disposed = false;

  /** `context` is absent for models that only embed; disposing the model disposes it. */
  private constructor(info: ModelInfo, model: LlamaModel, context: LlamaContext | undefined, options: ModelRuntimeOptions) {
    this.info = info;
    this.#model = model;
    this.#options = options;
    this.contextSize = context?.contextSize ?? Math.min(options.contextSize, model.trainContextSize);
    const sequences = context ? Array.from({ length: options.parallel }, () => context.getSequence()) : [];
    this.#pool = new SlotPool(sequences, options.maxQueue);
    this.#prompts = new ChatPromptRenderer(model);
    // An embedding input is evaluated in one decode call (llama.cpp pools the outputs of one call,
    // so a longer input cannot be split), and every token of that call is an output: llama.cpp
    // computes and stores logits for each, 2 × 4 bytes × vocabulary per token. With the context as
    // the batch, one 4,095-token input on a 32,000-token vocabulary took RSS from 161 MB to 1.19 GB.
    // An input is therefore at most one batch long, as llama-server's embeddings are (see
    // docs/performance.md).
    const embeddingContextSize = Math.min(this.contextSize, options.batchSize);
    this.#embeddings = new EmbeddingRunner(model, { contextSize: embeddingContextSize, threads: options.threads, maxQueue: options.maxQueue });
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
    return this.#pool.idle && this.#embeddings.idle;
  }

  /** Notified whenever a request starts, ends or queues, so the owner can schedule unloading. */
  set onActivity(listener: () => void) {
    this.#pool.onChange = listener;
    this.#embeddings.onActivity = listener;
  }

  set expiresAt(value: number | null) {
    this.#expiresAt = value;
  }

  /** The status as this model knows it; the engine adds the keep-alive it applies. */
  status(): Omit<LoadedModelStatus, "keepAliveMs"> {
    return {
      id: this.info.id,
      active: this.#pool.active + this.#embeddings.active,
      queued: this.#pool.queued + this.#embeddings.queued,
      expiresAt: this.#expiresAt,
      contextSize: this.contextSize,
    };
  }

  /** Embeds each input in turn on the model's embedding context; vectors come back L2-normalised. */
  embed(request: EmbedRequest, options: RequestOptions): Promise<Omit<EmbedResult, "loadMs">> {
    return this.#embeddings.embed(request, options);
  }

  /** `loadMs`: how long this request waited for the model to load, reported in the final timings. */
  async chat(request: ChatRequest, { signal, admit }: RequestOptions, loadMs = 0): Promise<ChatStream> {
    checkTokenIds(this.#model, request.sampling.logitBias.keys(), "logit_bias");
    // tool_choice "none" renders no tools: the model is not told of functions it may not call. A
    // prompt given as is has no template to show them in.
    const tools = request.toolChoice.type === "none" || request.prompt ? [] : request.tools;
    const prompt = this.#prompts.render(request, tools);
    if (prompt.tokens.length >= this.contextSize) {
      throw new ServerError("context_length_exceeded", {
        param: "messages",
        message: `This model's maximum context length is ${this.contextSize} tokens. However, your messages resulted in ${prompt.tokens.length} tokens. Please reduce the length of the messages.`,
      });
    }
    // Grammars are compiled (by llama.cpp, on the event loop) only for prompts that fit.
    const toolPlan = tools.length > 0 ? this.#prompts.toolPlan(request, tools, prompt.text) : undefined;
    const textFormat = responseFormatGrammar(request.responseFormat);
    const textGrammar = textFormat === undefined ? undefined : new LlamaGrammar(this.#model.llama, { grammar: textFormat });
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
    const completion = streamCompletion({
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
      signal,
      loadMs,
    });
    return new SequenceLease(completion.events, () => {
      this.#pool.release(sequence);
      // What was really used, also when the client left mid-stream.
      ticket?.settle({ promptTokens: tokens.length, completionTokens: completion.completionTokens });
    }, signal);
  }

  /** Fails queued requests and frees the weights; requests still decoding end with an error. */
  async dispose(): Promise<void> {
    this.#disposed = true;
    const unloading = new ServerError("overloaded", { retryAfter: 1, message: "The model is being unloaded. Retry shortly." });
    this.#pool.rejectWaiting(unloading);
    this.#embeddings.rejectWaiting(unloading);
    // Disposing the model disposes its contexts (chat and embedding) with it.
    await this.#model.dispose();
  }
}

/** llama.cpp's LLAMA_POOLING_TYPE_MEAN. */
const MEAN_POOLING = 1;
