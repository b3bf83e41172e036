import { GgmlType, LlamaGrammar, type Llama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import type { ChatEvent, ChatStream, TokenAlternative, TokenLogprob } from "../core/ChatEvent.js";
import { choiceSeed, type ChatRequest } from "../core/ChatRequest.js";
import type { EmbedRequest, EmbedResult } from "../core/EmbedRequest.js";
import type { KvCacheStatus, KvCacheType } from "../core/KvCacheType.js";
import type { PromptPreview, RequestOptions } from "../core/Engine.js";
import type { EngineCounters, LoadedModelStatus, ModelInfo } from "../core/ModelInfo.js";
import type { RerankRequest, RerankResult } from "../core/RerankRequest.js";
import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "../core/TokenizeRequest.js";
import { ServerError } from "../core/ServerError.js";
import { noProjectorMessage } from "../core/images.js";
import { checkModelFile } from "../models/checkModelFile.js";
import { ChatPromptRenderer, type RenderedPrompt } from "./ChatPromptRenderer.js";
import { BatchDecoder, countedTokens, DecoderSequence, type Drafter } from "./BatchDecoder.js";
import { checkTokenIds } from "./checkTokenIds.js";
import { EmbeddingRunner } from "./EmbeddingRunner.js";
import type { ContextActivity } from "./LazyContextPool.js";
import {
  contextMemoryBytes,
  createNativeSampler,
  nativeContextOf,
  nativeMultimodal,
  nativeSteps,
  sequenceIdOf,
  trimMemory,
  type NativeContext,
} from "./llamaInternals.js";
import { PromptCache } from "./PromptCache.js";
import { RankingRunner } from "./RankingRunner.js";
import { SequenceLease } from "./SequenceLease.js";
import { SlotPool } from "./SlotPool.js";
import { streamCompletion, tokenAlternative } from "./streamCompletion.js";
import { TokenBytes } from "./TokenBytes.js";
import { Utf8Tables } from "./Utf8Guard.js";
import { responseFormatGrammar } from "./tools/toolCallGrammar.js";
import { VisionProjector } from "./VisionProjector.js";
import { LoraAdapters, type AdapterUse } from "./LoraAdapters.js";
import { DraftModel } from "./DraftModel.js";
import type { DraftLength } from "./DraftLength.js";
import { NgramDrafter } from "./NgramDrafter.js";

export interface ModelRuntimeOptions {
  /** Context length per sequence; capped at the model's trained length. */
  contextSize: number;
  /** Sequences decoded together. */
  parallel: number;
  batchSize: number;
  threads: number;
  maxQueue: number;
  /** What the chat context's KV cache stores keys and values as (--cache-type-k, --cache-type-v). */
  cacheTypeK: KvCacheType;
  cacheTypeV: KvCacheType;
  /** Longest a generation may run, prompt included, in ms; then it ends with finish reason "length". 0: no limit. */
  maxGenerationMs: number;
  /** How long tokens decoded in a row may wait to be handed over together, in ms (--stream-hold). */
  streamHoldMs: number;
  /** The engine's totals, which this model adds to. */
  counters: EngineCounters;
  /** Speculative decoding (--speculation, --draft-max); absent when it is off. */
  speculation?: { type: "ngram" | "draft"; draftMax: number; draftModel?: string } | undefined;
  /** The engine's prompt cache beyond the slots (--cache-ram); absent when it is off. */
  promptCache?: PromptCache | undefined;
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
  /** Decodes the chat context's sequences; absent for models that only embed. */
  readonly #decoder: BatchDecoder | undefined;
  readonly #nativeContext: NativeContext | undefined;
  /** How the model reads images: its projector, or why it cannot (no projector, or none that loads). */
  readonly #vision: VisionProjector | { problem: string };
  /** The LoRA adapters applied over it, loaded on first use (models that chat). */
  readonly #adapters: LoraAdapters | undefined;
  readonly #pool: SlotPool<DecoderSequence>;
  /** The engine's prompt cache, for models whose sequences it can save whole (PromptCache.supports). */
  readonly #promptCache: PromptCache | undefined;
  /** Speculative decoding is on and the model's memory can drop a rejected draft (PromptCache.supports). */
  readonly #speculative: boolean;
  /** The model that drafts for it (--speculation draft), once loaded. */
  #draft: DraftModel | undefined;
  readonly #prompts: ChatPromptRenderer;
  readonly #embeddings: EmbeddingRunner;
  readonly #ranking: RankingRunner;
  /** The contexts created on first use (embedding, ranking), each lent to one request at a time. */
  readonly #lazyContexts: readonly ContextActivity[];
  readonly #options: ModelRuntimeOptions;
  readonly #tokenBytes: TokenBytes;
  /** The chat context's cache types and memory; absent for models that only embed. */
  readonly #kvCache: KvCacheStatus | undefined;
  /** Built on the first grammar-constrained request (a pass over the vocabulary). */
  #utf8Tables: Utf8Tables | undefined;
  #expiresAt: number | null = null;
  #disposed = false;
  #pins = 0;
  #unloading = false;
  readonly #idleWaiters: (() => void)[] = [];
  #onActivity: () => void = () => {};

  /** `context` is absent for models that only embed; disposing the model disposes it. */
  private constructor(
    info: ModelInfo,
    model: LlamaModel,
    context: LlamaContext | undefined,
    options: ModelRuntimeOptions,
    vision: VisionProjector | { problem: string },
    adapters?: LoraAdapters,
  ) {
    this.info = info;
    this.#model = model;
    this.#vision = vision;
    this.#adapters = adapters;
    this.#options = options;
    this.contextSize = context?.contextSize ?? Math.min(options.contextSize, model.trainContextSize);
    this.#kvCache = context
      ? { typeK: options.cacheTypeK, typeV: options.cacheTypeV, contextBytes: contextMemoryBytes(context) }
      : undefined;
    // node-llama-cpp's sequence objects are taken only for their ids (and kept, so that it never
    // reclaims them); the decoder does all decoding on the context.
    const sequences = context ? Array.from({ length: options.parallel }, () => context.getSequence()) : [];
    this.#nativeContext = context ? nativeContextOf(context) : undefined;
    this.#decoder = this.#nativeContext
      ? new BatchDecoder(this.#nativeContext, {
          batchSize: options.batchSize,
          threads: options.threads,
          holdMs: options.streamHoldMs,
          native: nativeSteps(model.llama),
        })
      : undefined;
    this.#promptCache = this.#decoder && options.promptCache && PromptCache.supports(model) ? options.promptCache : undefined;
    // A rejected draft leaves the cache as a tail cut off, which only a plain KV cache can do.
    this.#speculative = options.speculation !== undefined && PromptCache.supports(model);
    this.#pool = new SlotPool(
      sequences.map((sequence) => new DecoderSequence(sequenceIdOf(sequence), sequence)),
      options.maxQueue,
    );
    this.#prompts = new ChatPromptRenderer(model);
    this.#tokenBytes = new TokenBytes(model);
    // An embedding input is evaluated in one decode call (llama.cpp pools the outputs of one call,
    // so a longer input cannot be split), and every token of that call is an output: llama.cpp
    // computes and stores logits for each, 2 × 4 bytes × vocabulary per token. With the context as
    // the batch, one 4,095-token input on a 32,000-token vocabulary took RSS from 161 MB to 1.19 GB.
    // An input is therefore at most one batch long, as llama-server's embeddings are (see
    // docs/performance.md).
    const embeddingContextSize = Math.min(this.contextSize, options.batchSize);
    const runnerOptions = { contextSize: embeddingContextSize, threads: options.threads, maxQueue: options.maxQueue };
    this.#embeddings = new EmbeddingRunner(model, runnerOptions);
    // A query and a document are read as one input, under the same one-batch limit.
    this.#ranking = new RankingRunner(model, runnerOptions);
    this.#lazyContexts = [this.#embeddings.contexts, this.#ranking.contexts];
  }

  static async load(llama: Llama, info: ModelInfo, options: ModelRuntimeOptions): Promise<LoadedModel> {
    const canChat = info.capabilities.includes("chat");
    // A decoder model declares no pooling; mean pooling over its hidden states makes it embed, as
    // llama-server's `--pooling mean` does. Pooling applies to embedding contexts only, not to chat.
    const metadataOverrides =
      canChat && info.poolingType === undefined ? { [info.architecture]: { pooling_type: MEAN_POOLING } } : undefined;
    // Checked again here, the last step before llama.cpp (and node-llama-cpp's own GGUF reader)
    // opens it: the file may have been replaced since the registry listed it.
    const header = await checkModelFile(info.path);
    const model = await llama.loadModel({
      modelPath: info.path,
      ...(metadataOverrides ? { metadataOverrides: metadataOverrides as never } : {}),
    });
    // Before the context takes its memory: node-llama-cpp read the file's metadata and vocabulary
    // twice over on a libuv thread and freed most of it, and that arena would keep the pages. On
    // the Qwen2.5-0.5B shape, serving 4 streams, peak RSS went from 797 MiB to 742-755.
    trimMemory(llama);
    const noProjector = {
      problem: noProjectorMessage(info.id),
    };
    try {
      if (!canChat) return new LoadedModel(info, model, undefined, options, noProjector);
      const contextSize = Math.min(options.contextSize, model.trainContextSize);
      checkCacheTypes(info, model, options);
      const context = await model
        .createContext({
          sequences: options.parallel,
          contextSize,
          batchSize: options.batchSize,
          threads: { ideal: options.threads, min: options.threads },
          failedCreationRemedy: false,
          // As llama-server does: llama.cpp enables flash attention where the backend supports it.
          // On this CPU it made batched decoding of 4 streams ~10% faster. A quantized V cache
          // needs it: with "auto", llama.cpp turns it on for one (llama_init_from_model).
          flashAttention: "auto",
          experimentalKvCacheKeyType: GGML_TYPES[options.cacheTypeK],
          experimentalKvCacheValueType: GGML_TYPES[options.cacheTypeV],
        })
        .catch((error: unknown) => {
          if (options.cacheTypeK === "f16" && options.cacheTypeV === "f16") throw error;
          // llama.cpp refuses some models some types (MLA models need K and V alike; models whose
          // backend has no flash attention, a quantized V) and logs why; it returns no context.
          throw new ServerError("model_load_failed", {
            model: info.id,
            message: `The model \`${info.id}\` could not create its context with --cache-type-k ${options.cacheTypeK} and --cache-type-v ${options.cacheTypeV} (llama.cpp's log says why). Try f16.`,
            cause: error,
          });
        });
      const vision = info.projector === undefined ? noProjector : await loadProjector(llama, model, info, options);
      return new LoadedModel(info, model, context, options, vision, new LoraAdapters(model, info.id, header));
    } catch (error) {
      await model.dispose();
      throw error;
    }
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  get idle(): boolean {
    return this.#pins === 0 && this.#pool.idle && this.#lazyContexts.every((contexts) => contexts.idle);
  }

  /**
   * Keeps the model from counting as idle (so from being unloaded) until the returned function is
   * called: from the moment a request has the model until it holds a sequence or context of its
   * own, and for the whole of work that takes neither (tokenizing, counting). Without it, another
   * request's keep_alive 0, the idle timer or a load needing room could dispose of the model in
   * between: the fuzz suite found embeddings and rerank calls failing with "Object is disposed".
   */
  pin(): () => void {
    this.#pins++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#pins--;
      this.#activity();
    };
  }

  /** Set once its owner has decided to unload it: no new request may pin it. */
  get unloading(): boolean {
    return this.#unloading;
  }

  /**
   * Marks the model as being unloaded and resolves once no request uses it any more: a request
   * may have pinned it in the moment between the owner's decision and this call.
   */
  drainForUnload(): Promise<void> {
    this.#unloading = true;
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Notified whenever a request starts, ends or queues, so the owner can schedule unloading. */
  set onActivity(listener: () => void) {
    this.#onActivity = listener;
    const activity = () => this.#activity();
    this.#pool.onChange = activity;
    for (const contexts of this.#lazyContexts) contexts.onActivity = activity;
  }

  #activity(): void {
    this.#onActivity();
    if (this.idle) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  set expiresAt(value: number | null) {
    this.#expiresAt = value;
  }

  /** The status as this model knows it; the engine adds the keep-alive it applies. */
  status(): Omit<LoadedModelStatus, "keepAliveMs" | "loadMs"> {
    return {
      id: this.info.id,
      active: this.#lazyContexts.reduce((sum, contexts) => sum + contexts.active, this.#pool.active),
      queued: this.#lazyContexts.reduce((sum, contexts) => sum + contexts.queued, this.#pool.queued),
      expiresAt: this.#expiresAt,
      contextSize: this.contextSize,
      ...(this.#kvCache ? { kvCache: this.#kvCache } : {}),
    };
  }

  /** Embeds each input in turn on the model's embedding context; vectors come back L2-normalised. */
  embed(request: EmbedRequest, options: RequestOptions): Promise<Omit<EmbedResult, "loadMs">> {
    return this.#embeddings.embed(request, options);
  }

  /** Scores each document against the query on the model's ranking context. */
  rerank(request: RerankRequest, options: RequestOptions): Promise<Omit<RerankResult, "loadMs">> {
    return this.#ranking.rerank(request, options);
  }

  /**
   * The text's tokens, as llama.cpp's llama_tokenize gives them: `addSpecial` adds what the model
   * puts around a prompt (node-llama-cpp tokenizes without, so it is added here by the same rules:
   * WordPiece models [CLS] … [SEP], others BOS and EOS as their file's add_bos/add_eos say).
   */
  tokenize(request: TokenizeRequest, { admit }: RequestOptions): Promise<TokenizeResult> {
    return withoutTokens(admit, () => {
      const text = this.#model.tokenize(request.content, request.parseSpecial);
      const tokens = request.addSpecial ? this.#withSpecialTokens(text) : text;
      return { tokens, ...(request.withPieces ? { pieces: tokens.map((token) => this.#tokenBytes.piece(token)) } : {}) };
    });
  }

  /** The tokens' pieces, concatenated, as llama-server's /detokenize gives them (special tokens as their text). */
  detokenize(request: DetokenizeRequest, { admit }: RequestOptions): Promise<DetokenizeResult> {
    checkTokenIds(this.#model, request.tokens, "tokens");
    return withoutTokens(admit, () => ({ content: this.#tokenBytes.text(request.tokens as Token[]) }));
  }

  #withSpecialTokens(tokens: Token[]): Token[] {
    const special = this.#model.tokens;
    const wordPiece = this.#model.vocabularyType === "wpm";
    const first = wordPiece || special.shouldPrependBosToken ? special.bos : null;
    const last = wordPiece ? special.sep : special.shouldAppendEosToken ? special.eos : null;
    return [...(first == null ? [] : [first]), ...tokens, ...(last == null ? [] : [last])];
  }

  /**
   * `request.n` choices of one prompt on as many sequences, the prompt evaluated once (see
   * Engine.chatChoices). `loadMs`: how long this request waited for the model to load, reported
   * in the final timings.
   */
  async chatChoices(
    request: ChatRequest,
    { signal, admit }: RequestOptions,
    loadMs = 0,
    adapterUses: readonly AdapterUse[] = [],
  ): Promise<ChatStream[]> {
    const n = request.n ?? 1;
    if (n > this.#options.parallel) {
      throw new ServerError("invalid_request", {
        param: "n",
        message: `n=${n} needs ${n} sequences decoding together, and this server decodes at most ${this.#options.parallel} per model (--parallel). Ask for fewer choices.`,
      });
    }
    checkTokenIds(this.#model, request.sampling.logitBias.keys(), "logit_bias");
    const { tools, prompt } = await this.#render(request);
    // What llama-server counts (an M-RoPE image by its tokens, the KV cells it fills, not by its
    // positions): the context limit, the admission and the ledger take this count.
    const counted = countedTokens(prompt.tokens, prompt.tokens.length, prompt.images);
    if (counted >= this.contextSize) {
      throw new ServerError("context_length_exceeded", {
        param: request.prompt ? "prompt" : "messages",
        message: `This model's maximum context length is ${this.contextSize} tokens. However, your messages resulted in ${counted} tokens. Please reduce the length of the messages.`,
      });
    }
    // Grammars are compiled (by llama.cpp, on the event loop) only for prompts that fit.
    const toolPlan = tools.length > 0 ? this.#prompts.toolPlan(request, tools, prompt) : undefined;
    const textFormat = responseFormatGrammar(request.responseFormat);
    const textGrammar = textFormat === undefined ? undefined : new LlamaGrammar(this.#model.llama, { grammar: textFormat });
    const tokens = prompt.tokens;
    const maxOutputTokens = Math.min(request.maxTokens ?? Infinity, this.contextSize - counted);
    // Loaded (on first use) before admission: an adapter that cannot be applied costs no tokens.
    const adapters = await this.#adapters!.set(adapterUses);
    // Each choice may generate up to the cap: n × the cap is reserved (the hosted profile's limits).
    const ticket = await admit?.({ promptTokens: counted, maxOutputTokens: maxOutputTokens * n });
    const decoder = this.#decoder!;
    // Echo with logprobs scores the prompt's own tokens: it is read afresh, every token's logits kept.
    const scorePrompt = request.echo === true && request.logprobs !== undefined && prompt.givenText !== undefined;
    let sequences: DecoderSequence[] = [];
    let cachedTokens: number;
    let promptLogprobs: TokenLogprob[] | undefined;
    // Until the choices' leases own them, a failure (abort, decode error) gives back the sequences
    // acquired so far and settles the ticket as unused.
    try {
      // Prefer the free sequence whose cache already holds the longest start of this prompt: the
      // conversation so far, when a client sends its next turn.
      sequences = await this.#pool.acquireMany(n, signal, (candidate) => candidate.commonPrefix(tokens, adapters));
      const [leader, ...followers] = sequences as [DecoderSequence, ...DecoderSequence[]];
      // Keep that shared start and drop the rest; at least the last prompt token is evaluated
      // again, since its logits give the first new token. With the prompt cache, a longer start
      // saved in host memory is restored first, and what the sequence held is saved if it would
      // lose most of it.
      cachedTokens = this.#promptCache
        ? await this.#promptCache.prepare(decoder, leader, tokens, tokens.length - 1, adapters)
        : await decoder.keepPrefix(leader, tokens, tokens.length - 1, adapters);
      if (scorePrompt) {
        promptLogprobs = await this.#scorePrompt(leader, tokens, request.logprobs!.top, signal);
        cachedTokens = 0;
      }
      if (followers.length > 0) await this.#sharePrompt(leader, followers, tokens.slice(0, -1), signal, scorePrompt, prompt.images);
    } catch (error) {
      for (const sequence of sequences) this.#pool.release(sequence);
      ticket?.settle({ promptTokens: 0, completionTokens: 0 });
      throw error;
    }
    const deadline = this.#options.maxGenerationMs > 0 ? performance.now() + this.#options.maxGenerationMs : Infinity;
    const perChoiceCap = Math.min(maxOutputTokens, Math.floor((ticket?.maxOutputTokens ?? Infinity) / n));
    const logprobs = request.logprobs ? { top: request.logprobs.top, bytes: this.#tokenBytes } : undefined;
    const drafters = sequences.map(() => this.#drafter(prompt.images !== undefined));
    const completions = sequences.map((sequence, choice) =>
      streamCompletion({
        model: this.#model,
        decoder,
        sequence,
        promptTokens: tokens,
        cachedTokens,
        maxTokens: perChoiceCap,
        deadline,
        stop: request.stop,
        templateStops: prompt.stopTexts,
        stopTokens: prompt.stopTokens,
        sampling: { ...request.sampling, seed: choiceSeed(request.sampling.seed, choice) },
        textGrammar,
        tools: toolPlan,
        images: prompt.images,
        ...(prompt.thought ? { thought: prompt.thought } : {}),
        ...(prompt.recipientFirst ? { textHeader: prompt.calls.textRecipient } : {}),
        signal,
        loadMs,
        logprobs,
        ...(textGrammar || toolPlan ? { utf8: (this.#utf8Tables ??= new Utf8Tables(this.#tokenBytes.all())) } : {}),
        counters: this.#options.counters,
        sharedPrompt: n > 1 || scorePrompt,
        ...(drafters[choice] ? { drafter: drafters[choice] } : {}),
      }),
    );
    // The ticket is settled once, when the last choice ends: the prompt once, the completions summed.
    let open = n;
    const echo = request.echo && prompt.givenText !== undefined ? prompt.givenText : undefined;
    return completions.map(
      (completion, choice) =>
        new SequenceLease(
          echo === undefined
            ? completion.events
            : withEcho({ type: "text", text: echo, ...(promptLogprobs ? { logprobs: promptLogprobs } : {}) }, completion.events),
          () => {
            this.#pool.release(sequences[choice]!);
            drafters[choice]?.release?.();
            if (--open > 0) return;
            // What was really used, also when the client left mid-stream.
            ticket?.settle({
              promptTokens: counted,
              completionTokens: completions.reduce((sum, each) => sum + each.completionTokens, 0),
            });
          },
          signal,
          counted,
        ),
    );
  }

  /**
   * Evaluates the prompt (but its last token) once, on the leader, and copies its cache to the
   * other sequences. Each choice then decodes the last prompt token itself, the n of them in one
   * batch, since those logits give each choice its first token.
   */
  async #sharePrompt(
    leader: DecoderSequence,
    followers: DecoderSequence[],
    prefix: Token[],
    signal: AbortSignal,
    evaluated: boolean,
    images: RenderedPrompt["images"],
  ): Promise<void> {
    const counters = this.#options.counters;
    const decoder = this.#decoder!;
    // Counted already when the prompt was scored.
    if (!evaluated) counters.promptEvaluations++;
    counters.promptTokensEvaluated += prefix.length - leader.tokens.length;
    await decoder.evaluate(leader, prefix.slice(leader.tokens.length), signal, images);
    for (const follower of followers) {
      await decoder.copy(follower, leader);
      counters.promptCopies++;
    }
  }

  /**
   * Reads the prompt (but its last token) afresh on `sequence`, keeping every token's logits, and
   * gives each prompt token its logprob under the model's distribution after the tokens before it
   * (greedy sampler settings: the softmax of the raw logits over the whole vocabulary, as vLLM's
   * prompt logprobs), with the `top` most likely tokens. The first token has nothing before it: its
   * entry has logprob 0 and no alternatives, which the legacy format shows as null. Costs the
   * probabilities of the whole vocabulary per prompt token, so only echo with logprobs asks for it.
   */
  async #scorePrompt(sequence: DecoderSequence, tokens: Token[], top: number, signal: AbortSignal): Promise<TokenLogprob[]> {
    const counters = this.#options.counters;
    const decoder = this.#decoder!;
    await decoder.keepPrefix(sequence, [], 0);
    counters.promptEvaluations++;
    counters.promptTokensEvaluated += tokens.length - 1;
    const alternative = (token: Token, probability: number) => tokenAlternative(this.#tokenBytes, token, probability);
    const first = tokens[0]!;
    const entries: TokenLogprob[] = [{ ...alternative(first, 1), logprob: 0, top: [] }];
    const sampler = createNativeSampler(this.#model, { temperature: 0, topK: 40, topP: 0.95, minP: 0, seed: 0 });
    try {
      const predictions = await decoder.score(sequence, tokens.slice(0, -1), sampler, signal);
      predictions.forEach((prediction, i) => {
        const next = tokens[i + 1]!;
        const probabilities = prediction.probabilities ?? new Map<Token, number>();
        const alternatives: TokenAlternative[] = [];
        for (const [token, probability] of probabilities) {
          if (alternatives.length >= top) break;
          alternatives.push(alternative(token, probability));
        }
        entries.push({ ...alternative(next, probabilities.get(next) ?? 0), top: alternatives });
      });
    } finally {
      sampler.dispose();
    }
    return entries;
  }

  /**
   * A generation's drafter, with speculative decoding on: the draft model's (not for a prompt with
   * images, which it cannot read), or else prompt lookup.
   */
  #drafter(images: boolean): (Drafter & DraftLength) | undefined {
    if (!this.#speculative) return undefined;
    const { draftMax } = this.#options.speculation!;
    return (
      (!images ? this.#draft?.drafter(draftMax, this.#options.counters) : undefined) ?? new NgramDrafter(draftMax, this.#options.counters)
    );
  }

  /**
   * Loads `info` beside this model to draft for it (speculative decoding with a draft model);
   * rejects, leaving it to draft by n-gram, when it cannot (another vocabulary: see DraftModel).
   */
  async loadDraft(llama: Llama, info: ModelInfo): Promise<void> {
    if (!this.#speculative || this.#draft) return;
    const options = this.#options;
    this.#draft = await DraftModel.load(llama, info, this.#model, this.info.id, {
      contextSize: this.contextSize,
      parallel: options.parallel,
      batchSize: options.batchSize,
      threads: options.threads,
    });
  }

  /** The request's prompt, rendered as `chat` renders it: its tokens as text and their count; takes no decoding slot. */
  renderPrompt(request: ChatRequest, { admit }: RequestOptions): Promise<PromptPreview> {
    return withoutTokens(admit, async () => {
      const { tokens, text, images } = (await this.#render(request)).prompt;
      return { text: text ?? this.#tokenBytes.text(tokens), tokenCount: countedTokens(tokens, tokens.length, images) };
    });
  }

  async #render(request: ChatRequest): Promise<{ tools: ChatRequest["tools"]; prompt: RenderedPrompt }> {
    // tool_choice "none" renders no tools: the model is not told of functions it may not call. A
    // prompt given as is has no template to show them in.
    const tools = request.toolChoice.type === "none" || request.prompt ? [] : request.tools;
    const [image] = request.prompt ? [] : request.messages.flatMap((message) => (message.role === "user" ? (message.images ?? []) : []));
    if (image === undefined) return { tools, prompt: this.#prompts.render(request, tools) };
    const vision = this.#vision;
    if (!(vision instanceof VisionProjector)) throw new ServerError("invalid_request", { param: image.param, message: vision.problem });
    return { tools, prompt: await this.#prompts.renderWithImages(request, tools, vision, this.#nativeContext!) };
  }

  /** Fails queued requests and frees the weights; requests still decoding end with an error. */
  async dispose(): Promise<void> {
    this.#disposed = true;
    const unloading = new ServerError("overloaded", { retryAfter: 1, message: "The model is being unloaded. Retry shortly." });
    this.#pool.rejectWaiting(unloading);
    for (const contexts of this.#lazyContexts) contexts.rejectWaiting(unloading);
    // The step under way finishes first: llama.cpp must not free the context mid-decode.
    await this.#decoder?.close(unloading);
    await this.#draft?.dispose();
    if (this.#decoder) this.#promptCache?.forget(this.#decoder);
    if (this.#vision instanceof VisionProjector) await this.#vision.free();
    // Disposing the model disposes its contexts (chat and embedding) with it.
    await this.#model.dispose();
    trimMemory(this.#model.llama);
  }
}

/**
 * The model's projector, loaded with the native build's mtmd binding; or why images cannot be read
 * (the prebuilt binary has no mtmd; llama.cpp refused the file): text requests are served either way.
 */
async function loadProjector(
  llama: Llama,
  model: LlamaModel,
  info: ModelInfo,
  options: ModelRuntimeOptions,
): Promise<VisionProjector | { problem: string }> {
  const native = nativeMultimodal(llama);
  if (!native) {
    return {
      problem: `The model \`${info.id}\` reads images only on the native engine: this server runs llama.cpp's prebuilt binary, which lacks its image support (mtmd). Run \`modelhost engine build\`, then restart the server.`,
    };
  }
  try {
    // Checked again, as the model is: the file may have been replaced since the registry listed it.
    const header = await checkModelFile(info.projector!);
    return await VisionProjector.load(native, model, info.projector!, {
      threads: options.threads,
      batchSize: options.batchSize,
      projectorType: String(header.metadata.get("clip.projector_type") ?? header.metadata.get("clip.vision.projector_type") ?? ""),
    });
  } catch (error) {
    return {
      problem: `The model \`${info.id}\` cannot read images: llama.cpp could not load its projector ${info.projector!} (${(error as Error).message}).`,
    };
  }
}

/** llama.cpp's LLAMA_POOLING_TYPE_MEAN. */
const MEAN_POOLING = 1;

/** A completion whose first text event is its prompt (legacy completions' `echo`), with the prompt's logprobs when scored. */
async function* withEcho(
  echo: ChatEvent & { type: "text" },
  events: AsyncGenerator<ChatEvent, void, undefined>,
): AsyncGenerator<ChatEvent, void, undefined> {
  try {
    if (echo.text || echo.logprobs?.length) yield echo;
    yield* events;
  } finally {
    // Closed before the echo was read: the completion's generator still owns a decode to stop.
    await events.return();
  }
}

/**
 * Runs `work`, which evaluates nothing (tokenizing, counting a prompt), admitted as a request that
 * uses no tokens: it counts against the caller's request limits, and the ledger records it.
 */
async function withoutTokens<T>(admit: RequestOptions["admit"], work: () => T | Promise<T>): Promise<T> {
  const ticket = await admit?.({ promptTokens: 0, maxOutputTokens: 0 });
  try {
    return await work();
  } finally {
    ticket?.settle({ promptTokens: 0, completionTokens: 0 });
  }
}

/** The KV cache types as node-llama-cpp passes them to llama.cpp (llama_context_params type_k, type_v). */
const GGML_TYPES: Record<KvCacheType, GgmlType> = {
  f32: GgmlType.F32,
  f16: GgmlType.F16,
  bf16: GgmlType.BF16,
  q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0,
  q4_1: GgmlType.Q4_1,
  iq4_nl: GgmlType.IQ4_NL,
  q5_0: GgmlType.Q5_0,
  q5_1: GgmlType.Q5_1,
};

/** Values per block of each type: a row of the cache (one head) must hold whole blocks. */
const BLOCK_VALUES: Record<KvCacheType, number> = { f32: 1, f16: 1, bf16: 1, q8_0: 32, q4_0: 32, q4_1: 32, iq4_nl: 32, q5_0: 32, q5_1: 32 };

/**
 * Refuses, before llama.cpp does, cache types whose blocks do not divide the model's head size
 * (llama_init_from_model checks the same and returns no context, with only a log line to say why):
 * the test models' 16-value heads take no quantized type; real models' 64 or 128 take every one.
 */
function checkCacheTypes(info: ModelInfo, model: LlamaModel, options: ModelRuntimeOptions): void {
  const metadata = model.fileInfo.architectureMetadata as {
    embedding_length?: number;
    attention?: { head_count?: number | number[]; key_length?: number; value_length?: number };
  };
  const headCount = metadata.attention?.head_count;
  const perHead =
    typeof headCount === "number" && headCount > 0 && metadata.embedding_length ? metadata.embedding_length / headCount : undefined;
  const heads = [
    ["--cache-type-k", options.cacheTypeK, metadata.attention?.key_length ?? perHead],
    ["--cache-type-v", options.cacheTypeV, metadata.attention?.value_length ?? perHead],
  ] as const;
  for (const [flag, type, headSize] of heads) {
    if (headSize === undefined || headSize % BLOCK_VALUES[type] === 0) continue;
    throw new ServerError("model_load_failed", {
      model: info.id,
      message: `The model \`${info.id}\` cannot keep its KV cache as ${type} (${flag}): its attention heads have ${headSize} values, and ${type} stores blocks of ${BLOCK_VALUES[type]}. Use f16, bf16 or f32 for it.`,
    });
  }
}
