import type { Token } from "node-llama-cpp";
import { probabilityMap, type NativeCheckpoint, type NativeContext, type NativeSampler, type NativeSteps } from "./llamaInternals.js";

/** A sampled token, with its distribution when it was asked for. */
export interface Sampled {
  token: Token;
  /** The distribution it was sampled from, most likely first (tokens the sampler chain removed are absent). */
  probabilities?: Map<Token, number>;
  /** The sampled token's probability under that distribution. */
  confidence?: number;
}

export interface GenerationSetup {
  /** Configured for this generation; it keeps the penalty history and grammar state as it samples. */
  sampler: NativeSampler;
  /** The images among the input. */
  images?: PromptImages | undefined;
  /** Ask for each token's probability, and with `probabilities` the whole distribution. */
  metadata?: { probabilities: boolean };
  /** True for a token after which nothing more is decoded: the end of the turn. */
  isLast(token: Token): boolean;
  /**
   * The tokens after which the native loop stops: those `isLast` is true for besides the model's
   * end-of-generation tokens (one it does not know costs up to one hand-over of steps,
   * --stream-hold or 16 steps, decoded for nothing), and those `sampled` answers true for.
   */
  endTokens?: readonly Token[];
  /** The most tokens the consumer will take: no step is decoded for more. */
  limit: number;
  /**
   * Called with each sampled token before the next step starts, while the sampler is idle (a
   * sampler configured anew per token: Utf8Guard). True: sample the next token in a step of its
   * own, not in a native loop (the sampler changes again after it). Such a token must be in
   * `endTokens`, or a native loop would sample on past it before this is called.
   */
  sampled?(token: Token): boolean;
  /**
   * Speculative decoding: drafts of tokens checked in the same decode as the generation's own (see
   * BatchDecoder.#verify). The sequence's memory must be able to drop a tail (a plain KV cache).
   */
  drafter?: Drafter;
}

/** Proposes the tokens likely to follow, and learns from what the model accepted (NgramDrafter). */
export interface Drafter {
  /**
   * Up to `room` tokens to check after `next`, which the sequence decodes now after `history`
   * (a draft model's decoded on its own context: a promise).
   */
  draft(history: readonly Token[], next: Token, room: number): Token[] | Promise<Token[]>;
  /** The first `accepted` of `drafted` tokens were those the model sampled. */
  record(drafted: number, accepted: number): void;
  /** How many steps, from the one that decodes the token at `position`, it will not draft in. */
  idle(position: number): number;
  /** The generation is over: what it held for drafting goes back (a draft model's sequence). */
  release?(): void;
}

/**
 * The images of a prompt. In token lists an image stands as one pseudo-token per position it takes,
 * negative (no vocabulary has such ids) and derived from its content (imageTokens), so prefix
 * matching, slot choice and the prompt cache treat a conversation's images as they treat its text:
 * the same image at the same place matches, another does not.
 */
export interface PromptImages {
  /**
   * The image whose pseudo-tokens begin with `token`: how many positions it takes (`length`, its
   * pseudo-tokens), how many tokens it counts as (`tokens`: mtmd's n_tokens, the KV cells it fills;
   * more than `length` for an image placed by M-RoPE positions), and its evaluation into a
   * sequence at `position`.
   */
  at(token: Token): { length: number; tokens: number; evaluate(sequenceId: number, position: number): Promise<void> } | undefined;
}

/**
 * How many tokens the first `length` of a prompt's `tokens` count as, as llama-server counts them
 * (prompt_tokens, cached_tokens, the context limit): an image its `tokens`, not its positions. An
 * M-RoPE image (Qwen2-VL's) of 6 × 5 merged patches takes 6 positions, so 6 pseudo-tokens, and
 * fills 30 KV cells, which llama-server's server_tokens hold as 30 entries. `length` must not fall
 * inside an image (wholeImages).
 */
export function countedTokens(tokens: readonly Token[], length: number, images: PromptImages | undefined): number {
  if (!images) return length;
  let counted = 0;
  for (let i = 0; i < length;) {
    const image = tokens[i]! < 0 ? images.at(tokens[i]!) : undefined;
    counted += image ? image.tokens : 1;
    i += image ? image.length : 1;
  }
  return counted;
}

/**
 * The pseudo-tokens of an image: `length` consecutive negative ids from the first 48 bits of its
 * content's hash (hex), so two images match by chance once in 2^48 (they stay JavaScript numbers:
 * only text tokens are written into native batches).
 */
export function imageTokens(hash: string, length: number): Token[] {
  const base = Number.parseInt(hash.slice(0, 12), 16);
  return Array.from({ length }, (_, i) => -(2 + base + i) as Token);
}

/**
 * `length` made to end outside any image of `tokens`: a cut inside one moves back to its start
 * (a cache holds an image whole or not at all; llama-server refuses such a cut too).
 */
export function wholeImages(tokens: readonly Token[], length: number): number {
  let end = length;
  while (end > 0 && end < tokens.length && tokens[end]! < 0 && tokens[end - 1] === tokens[end]! + 1) end--;
  return end;
}

/**
 * The LoRA adapters a sequence's steps decode with, at their scales (adapters at scale 0 left out,
 * as llama.cpp leaves them out). llama.cpp applies adapters to a whole context
 * (llama_set_adapters_lora), so a batch holds only sequences of one set, as llama-server batches
 * only slots whose adapters are equal; and a sequence's cache holds what its tokens gave under its
 * set, so another set reuses none of it.
 */
export interface AdapterSet {
  /** Equal for equal sets; "" for none. */
  readonly key: string;
  /** node-llama-cpp's loaded adapters (AddonModelLora), with their scales. */
  readonly adapters: readonly unknown[];
  readonly scales: readonly number[];
}

export const NO_ADAPTERS: AdapterSet = { key: "", adapters: [], scales: [] };

/** One sequence of the context: what its cache holds, position by position. */
export class DecoderSequence {
  readonly id: number;
  /** The tokens in the sequence's cache, positions 0, 1, …; kept exact by the decoder. */
  readonly tokens: Token[] = [];
  /** The adapters its cache was computed with, and its steps decode with (set by keepPrefix). */
  adapters: AdapterSet = NO_ADAPTERS;
  /** What reserved the id (node-llama-cpp's sequence object, which frees its id when collected). */
  readonly owner: unknown;

  constructor(id: number, owner?: unknown) {
    this.id = id;
    this.owner = owner;
  }

  /** How many leading tokens of `tokens`, read with `adapters`, the cache already holds. */
  commonPrefix(tokens: readonly Token[], adapters: AdapterSet = NO_ADAPTERS): number {
    return adapters.key === this.adapters.key ? commonPrefixLength(this.tokens, tokens) : 0;
  }
}

/** How many leading tokens `a` and `b` share. */
export function commonPrefixLength(a: readonly Token[], b: readonly Token[]): number {
  const end = Math.min(a.length, b.length);
  let i = 0;
  while (i < end && a[i] === b[i]) i++;
  return i;
}

/** Work on one sequence: tokens to decode, and what to do once they are. */
interface Job {
  sequence: DecoderSequence;
  /** Still to decode, appended to what the sequence holds. */
  input: Token[];
  /** Sample after the input's last token (a generation step), or after every token (scoring). */
  sampleAt: "none" | "last" | "every";
  /** The images among the input (runs of negative pseudo-tokens), each evaluated alone, between two batches. */
  images?: PromptImages | undefined;
  sampler?: NativeSampler;
  metadata?: { probabilities: boolean };
  signal: AbortSignal | undefined;
  /** The job's input is decoded (and sampled): results in input order, one per sampled position. */
  done(results: Sampled[]): void;
  fail(error: unknown): void;
  /**
   * A generation's: how many tokens it may still sample after this step's, and the tokens that end
   * it besides the model's own. Such jobs can be decoded on by the native loop.
   */
  generation?: {
    ahead(): number;
    endTokens: Int32Array;
    /** Speculative decoding's drafter, and whether a sampled token ends what may be taken in one step. */
    drafter?: Drafter;
    stops(token: Token): boolean;
  };
  /** A native loop that decoded this job is over: nothing decodes it ahead any more. */
  released?(): void;
}

/** A job's part of one batch. */
interface BatchItem {
  job: Job;
  /** How many of its input tokens are in the batch. */
  count: number;
  /** Where the first of them goes in its sequence. */
  position: number;
  /** Which of them get logits (indexes into its part). */
  logitIndexes: Uint32Array;
  /** Drafted tokens decoded after its input token, to be checked (speculative decoding). */
  draft?: Token[];
}

/**
 * How far a generation's consumer may fall behind: past this many tokens waiting, its sequence
 * sits out the steps until it takes one. Until then decoding runs on, so a consumer whose HTTP
 * write took longer than a step catches up from tokens already decoded, and one that reads nothing
 * holds up no one. Twice the native loop's lead (LEAD_STEPS, 16, in decodeAndSample.cpp): the loop
 * hands over up to that many steps at once, and a consumer that gets them all in one go is not
 * behind.
 */
export const MAX_TOKENS_AHEAD = 32;

/**
 * Decodes every sequence of one llama.cpp context in shared batches, and samples.
 *
 * Why not node-llama-cpp's LlamaContextSequence.evaluate: per generated token it resolves a sampler
 * config, re-applies it to the native sampler, queues the decode through its batch scheduler and
 * samples in a second pass, all in JavaScript on the event loop; with one stream of the tiny model
 * that cost more than the decode itself (2,468 tokens/s through it against 5,573 driving the same
 * native calls directly, same tokens at temperature 0, prebuilt engine, 1 thread; see
 * docs/performance.md). Here a step is: one batch holding the next token of every generating
 * sequence and, in the room left, chunks of prompts being read (continuous batching, as
 * llama-server), one native decode, then one native sample per generating sequence, in parallel on
 * the libuv pool. Each sampler is configured once per generation and keeps its own history.
 *
 * Steps are pipelined with their consumers: as soon as a step's tokens are sampled they are
 * handed over and the next step, whose input they are, starts decoding, so a consumer's work with
 * token k (detokenizing, matching, the HTTP write) runs while token k+1 is decoded. With
 * modelhost's native steps, a batch of generations goes on in a native loop that decodes step
 * after step on the decode thread and hands the steps' tokens over a few at a time, until JavaScript
 * asks for the context back (#generate). A consumer that falls behind (a client that does not
 * read) has at most MAX_TOKENS_AHEAD tokens waiting, and its sequence then sits out the steps
 * until it takes one. Tokens decoded for a consumer that stopped stay in the cache: they are a
 * real continuation, so a later prompt that shares them reuses them.
 *
 * Everything that touches the context's memory (decoding, trimming or copying a sequence's cache)
 * runs on this one loop, never two at once: llama.cpp's memory is not safe to edit during a decode.
 */
export class BatchDecoder {
  readonly #native: NativeContext;
  readonly #batchSize: number;
  readonly #steps: NativeSteps | undefined;
  /** How long the native loop may hold decoded steps to hand several over at once, in µs. */
  readonly #holdUs: number;
  /** Jobs with input to decode, in arrival order. */
  readonly #ready: Job[] = [];
  /** Tokens of the last step for consumers that wait, given once the next step has started. */
  readonly #handOvers: Array<() => void> = [];
  /** Cache edits waiting for the gap between two steps. */
  readonly #edits: Array<() => Promise<void>> = [];
  #running = false;
  /**
   * The native loop under way: its jobs, and what it reads between steps: [0] the flag that asks it
   * to stop before its next step, [1] how long it may hold steps (µs).
   */
  #looping: { jobs: Set<Job>; control: Int32Array } | undefined;
  #closed: Error | undefined;
  /** The key of the adapter set the context decodes with now. */
  #adapters = NO_ADAPTERS.key;
  readonly #idleWaiters: Array<() => void> = [];

  /**
   * `native`: modelhost's native steps (binaries built by `modelhost engine build`), which decode
   * and sample the plain generation steps in one libuv task instead of 1 + n, and go on decoding
   * generations step after step without waiting for the event loop. `holdMs`: how long that loop
   * may hold decoded steps to hand several over at once (--stream-hold).
   */
  constructor(native: NativeContext, options: { batchSize: number; threads: number; holdMs: number; native?: NativeSteps | undefined }) {
    this.#native = native;
    this.#batchSize = options.batchSize;
    this.#steps = options.native;
    this.#holdUs = Math.round(options.holdMs * 1000);
    native.setThreads(options.threads);
  }

  /**
   * Makes the sequence hold at most `keepAtMost` leading tokens of `tokens`: keeps the longest start
   * of its cache that matches, drops the rest. Resolves to how many tokens it kept. A memory that
   * cannot drop part of a sequence (recurrent models) is cleared instead.
   */
  keepPrefix(sequence: DecoderSequence, tokens: readonly Token[], keepAtMost = tokens.length, adapters?: AdapterSet): Promise<number> {
    return this.#edit(() => {
      // Read with other adapters, nothing it holds is of use: the sequence starts afresh with these.
      if (adapters && adapters.key !== sequence.adapters.key) {
        this.#truncate(sequence, 0);
        sequence.adapters = adapters;
      }
      const keep = wholeImages(tokens, Math.min(sequence.commonPrefix(tokens, sequence.adapters), keepAtMost));
      if (keep < sequence.tokens.length) this.#truncate(sequence, keep);
      return sequence.tokens.length;
    });
  }

  /** Makes `target` hold exactly what `source` holds (llama_memory_seq_cp), without decoding. */
  copy(target: DecoderSequence, source: DecoderSequence): Promise<void> {
    return this.#edit(async () => {
      this.#truncate(target, 0);
      if (source.tokens.length === 0) return;
      await this.#native.copySequenceStateFromOtherSequence(target.id, source.id);
      target.tokens.push(...source.tokens);
      target.adapters = source.adapters;
    });
  }

  /** Copies what the sequence holds into `checkpoint` (host memory), between two steps. */
  save(sequence: DecoderSequence, checkpoint: NativeCheckpoint): Promise<void> {
    return this.#edit(() => checkpoint.init(this.#native, sequence.id));
  }

  /**
   * Makes the sequence hold the first `length` (at least 1) of `tokens`, the tokens whose state
   * `checkpoint` holds, without decoding. Resolves to whether it could; if not, the sequence is
   * left empty.
   */
  restore(
    sequence: DecoderSequence,
    checkpoint: NativeCheckpoint,
    tokens: readonly Token[],
    length: number,
    adapters: AdapterSet,
  ): Promise<boolean> {
    return this.#edit(async () => {
      let restored = false;
      try {
        restored = await this.#native.restoreCheckpoint(checkpoint, length - 1, sequence.id);
      } catch {
        // Disposed meanwhile (evicted for another model's entry): as if it had not been there.
      }
      // Restored or not, what the sequence held is gone (a failed restore may have written part).
      sequence.tokens.length = 0;
      sequence.adapters = adapters;
      if (restored) sequence.tokens.push(...tokens.slice(0, length));
      else this.#native.removeTokenCellsFromSequence(sequence.id, -1, -1);
      return restored;
    });
  }

  /** Decodes `tokens` after what the sequence holds, in the batches of the other sequences' steps (`images`: those among them). */
  evaluate(sequence: DecoderSequence, tokens: readonly Token[], signal?: AbortSignal, images?: PromptImages): Promise<void> {
    if (tokens.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) =>
      this.#enqueue({ sequence, input: [...tokens], sampleAt: "none", images, signal, done: () => resolve(), fail: reject }),
    );
  }

  /**
   * Decodes `tokens` keeping the logits of each, and samples each position with `sampler` (asking
   * for the distribution): what the model predicted after every prefix of the tokens.
   */
  score(sequence: DecoderSequence, tokens: readonly Token[], sampler: NativeSampler, signal?: AbortSignal): Promise<Sampled[]> {
    if (tokens.length === 0) return Promise.resolve([]);
    const results: Sampled[] = [];
    return new Promise((resolve, reject) =>
      this.#enqueue({
        sequence,
        input: [...tokens],
        sampleAt: "every",
        sampler,
        metadata: { probabilities: true },
        signal,
        // A long input is scored chunk by chunk: `done` runs once per chunk's step.
        done: (chunk) => {
          results.push(...chunk);
          if (results.length === tokens.length) resolve(results);
        },
        fail: reject,
      }),
    );
  }

  /**
   * Decodes `input` (at least one token) after what the sequence holds, then generates: each
   * sampled token is the next step's input, until the consumer stops iterating or a token is the
   * last (`setup.isLast`). Returning the iterator waits for a step still decoding this sequence,
   * so its cache is settled before anyone else uses the sequence.
   */
  generate(
    sequence: DecoderSequence,
    input: readonly Token[],
    setup: GenerationSetup,
    signal?: AbortSignal,
  ): AsyncGenerator<Sampled, void, undefined> {
    return new Generation(this, sequence, input, setup, signal).iterate();
  }

  /** Fails what waits, waits for the step under way; nothing is decoded after. */
  async close(error: Error): Promise<void> {
    this.#closed = error;
    this.yieldLoop();
    for (const job of this.#ready.splice(0)) job.fail(error);
    await this.idle();
  }

  /** Resolves when no step or cache edit is under way. */
  idle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** @internal (Generation) */
  enqueue(job: Job): void {
    this.#enqueue(job);
  }

  /** @internal (Generation) Takes a waiting job off the queue: false if it is not waiting (it may be decoding). */
  withdraw(job: Job): boolean {
    if (this.looping(job)) this.yieldLoop();
    return this.#take(job);
  }

  /** @internal (Generation) Whether a native loop under way decodes this job's sequence ahead. */
  looping(job: Job): boolean {
    return this.#looping?.jobs.has(job) ?? false;
  }

  /** @internal (Generation) Asks the native loop under way to stop before its next step. */
  yieldLoop(): void {
    if (this.#looping) this.#looping.control[0] = 1;
  }

  #take(job: Job): boolean {
    const index = this.#ready.indexOf(job);
    if (index !== -1) this.#ready.splice(index, 1);
    return index !== -1;
  }

  #enqueue(job: Job): void {
    if (this.#closed) {
      job.fail(this.#closed);
      return;
    }
    // New work joins at the next step: the loop hands the context back. Its own jobs coming
    // back for their next token (the loop decodes that) do not stop it.
    if (!this.looping(job)) this.yieldLoop();
    this.#ready.push(job);
    this.#kick();
  }

  #edit<T>(edit: () => T | Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closed);
    this.yieldLoop();
    return new Promise<T>((resolve, reject) => {
      this.#edits.push(async () => {
        try {
          resolve(await edit());
        } catch (error) {
          reject(error);
        }
      });
      this.#kick();
    });
  }

  #truncate(sequence: DecoderSequence, keep: number): void {
    if (this.#native.removeTokenCellsFromSequence(sequence.id, keep, -1)) {
      sequence.tokens.length = keep;
      return;
    }
    // Recurrent and hybrid memories can only drop whole sequences.
    this.#native.removeTokenCellsFromSequence(sequence.id, -1, -1);
    sequence.tokens.length = 0;
  }

  /** Starts the loop on the next microtask, so that work queued in the same turn shares its first step. */
  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    queueMicrotask(() => void this.#loop());
  }

  async #loop(): Promise<void> {
    try {
      while (this.#edits.length > 0 || this.#ready.length > 0) {
        this.#handOver();
        for (let edit = this.#edits.shift(); edit; edit = this.#edits.shift()) await edit();
        if (this.#ready.length === 0) continue;
        // The step is under way once #step returns its promise (the native call is made before
        // its first await): only then are the last step's tokens handed to their consumers, so
        // their work (a few µs on the tiny model, ~60 µs on the bench model, between two decodes
        // when done first) overlaps this decode instead of delaying it.
        const step = this.#step();
        this.#handOver();
        await step;
      }
    } catch (error) {
      // A fault of the loop itself, not of a batch: fail what waits rather than leave it hanging.
      for (const job of this.#ready.splice(0)) job.fail(error);
    } finally {
      this.#handOver();
      this.#running = false;
      for (const wake of this.#idleWaiters.splice(0)) wake();
    }
  }

  /** @internal (Generation) Gives a sampled token to its waiting consumer once the next step has started. */
  handOverLater(handOver: () => void): void {
    this.#handOvers.push(handOver);
  }

  #handOver(): void {
    for (const handOver of this.#handOvers.splice(0)) handOver();
  }

  /**
   * One batch: the next token of every generating sequence first, then prompt chunks in arrival
   * order. The batch's jobs leave the queue while they decode; those with input left go back to
   * its front, ahead of later arrivals.
   */
  async #step(): Promise<void> {
    // An image next in a prompt is evaluated in a step of its own: its embeddings cannot share a
    // decode with tokens, and mtmd may switch the context to non-causal attention for it (Gemma 3).
    const image = this.#ready.find((job) => job.input[0]! < 0);
    if (image) return this.#evaluateImage(image);
    // One adapter set a batch (see AdapterSet): that of the job waiting longest. Jobs decoded
    // come back at the queue's end, so sets take turns step by step.
    const adapters = this.#ready[0]!.sequence.adapters;
    // Drafts first: a draft model's are decoded on its own context, meanwhile jobs may leave.
    const proposed = this.#drafts(adapters);
    const drafts = proposed instanceof Promise ? await proposed : proposed;
    const batch: BatchItem[] = [];
    let size = 0;
    const order = [...this.#ready.filter((job) => job.input.length === 1), ...this.#ready.filter((job) => job.input.length > 1)];
    for (const job of order) {
      if (job.signal?.aborted) {
        this.#take(job);
        job.fail(job.signal.reason);
        continue;
      }
      if (job.sequence.adapters.key !== adapters.key) continue;
      // Text up to the next image: that image has a step of its own.
      const imageAt = job.images ? job.input.findIndex((token) => token < 0) : -1;
      const count = Math.min(imageAt === -1 ? job.input.length : imageAt, this.#batchSize - size);
      if (count <= 0) break;
      const draft = drafts?.get(job)?.slice(0, this.#batchSize - size - 1) ?? [];
      if (draft.length > 0) {
        batch.push({
          job,
          count: 1,
          position: job.sequence.tokens.length,
          logitIndexes: Uint32Array.from({ length: draft.length + 1 }, (_, i) => i),
          draft,
        });
        this.#take(job);
        size += 1 + draft.length;
        continue;
      }
      const finishes = count === job.input.length;
      const logitIndexes =
        job.sampleAt === "every"
          ? Uint32Array.from({ length: count }, (_, i) => i)
          : job.sampleAt === "last" && finishes
            ? Uint32Array.of(count - 1)
            : new Uint32Array(0);
      batch.push({ job, count, position: job.sequence.tokens.length, logitIndexes });
      this.#take(job);
      size += count;
    }
    if (batch.length === 0) return;
    // In sequence order: llama.cpp decodes a batch in one pass over the weights per run of
    // consecutive sequence ids (each sequence has a KV stream of its own, and a pass's streams must
    // be adjacent: llama_batch_allocr::split_equal). Four streams of the bench model had come to
    // run as sequences 3, 0, 1, 2 (two passes) or worse, after a single stream had gone first:
    // 205-257 tokens/s instead of 290-340. Only the last job can have input left (the budget cut
    // it), so the order the queue gets jobs back in is unchanged.
    batch.sort((a, b) => a.job.sequence.id - b.job.sequence.id);
    const native = this.#native;
    // Per job: its samples, or why it has none. A failed decode fails the whole batch; a failed
    // sample (no candidate survived a grammar) only its own job.
    let outcomes: Array<Sampled[] | { error: unknown }>;
    try {
      this.#useAdapters(adapters);
      native.initBatch(size);
      const batchIndexes = batch.map(({ job, count, position, logitIndexes, draft }) =>
        native.addToBatch(job.sequence.id, position, Uint32Array.from([...job.input.slice(0, count), ...(draft ?? [])]), logitIndexes),
      );
      // Generation steps without metadata are sampled in the native step when the binary has it;
      // the rest (logprobs, scoring) by node-llama-cpp's sampleToken after the decode.
      const steps = this.#steps;
      const combined = steps
        ? batch.flatMap((item, i) => (item.job.sampler && !item.job.metadata && item.logitIndexes.length === 1 ? [i] : []))
        : [];
      // A batch of nothing but such generations goes on in the native loop.
      // A generation that drafts joins it only for the steps it would not draft in (a pause after
      // failed drafts): the loop decodes one token a step.
      const ahead =
        combined.length === batch.length
          ? Math.min(
              ...batch.map(({ job, count, position }) =>
                Math.min(job.generation?.ahead() ?? 0, job.generation?.drafter?.idle(position + count) ?? Infinity),
              ),
            )
          : 0;
      if (steps && ahead > 0) return await this.#generate(steps, batch, batchIndexes, ahead);
      const natively = new Map<number, number>();
      if (combined.length > 0) {
        const tokens = await steps!.decodeAndSample(
          native,
          Int32Array.from(combined, (i) => batchIndexes[i]![0]!),
          combined.map((i) => batch[i]!.job.sampler!),
        );
        combined.forEach((i, k) => natively.set(i, tokens[k]!));
      } else {
        await native.decodeBatch();
      }
      for (const { job, count } of batch) job.sequence.tokens.push(...job.input.splice(0, count));
      outcomes = await Promise.all(
        batch.map(async ({ job, draft }, i) => {
          try {
            const token = natively.get(i);
            if (draft) return await this.#verify(job, draft, batchIndexes[i]!);
            return token === undefined ? await this.#sample(job, batchIndexes[i]!) : [{ token: checked(token) }];
          } catch (error) {
            return { error };
          }
        }),
      );
      // The drafted tokens the model did not write leave the caches (the accepted ones stay).
      batch.forEach(({ job, draft }, i) => {
        const outcome = outcomes[i]!;
        if (!draft) return;
        const accepted = Array.isArray(outcome) ? outcome.length - 1 : 0;
        job.sequence.tokens.push(...draft.slice(0, accepted));
        if (accepted < draft.length) this.#truncate(job.sequence, job.sequence.tokens.length);
      });
    } catch (error) {
      // What the failed batch left in these sequences' caches is unknown: they start afresh.
      for (const { job } of batch) {
        this.#truncate(job.sequence, 0);
        job.fail(error);
      }
      return;
    }
    this.#ready.unshift(...batch.filter(({ job }, i) => job.input.length > 0 && Array.isArray(outcomes[i])).map(({ job }) => job));
    batch.forEach(({ job }, i) => {
      const outcome = outcomes[i]!;
      if (!Array.isArray(outcome)) job.fail(outcome.error);
      else if (job.input.length === 0 || job.sampleAt === "every") job.done(outcome);
    });
  }

  /**
   * Sets the context's adapters for the next decode, when they differ from the last one's. llama.cpp
   * then builds its compute graph anew (a set cannot reuse the last set's graph), which is what a
   * step that changes set costs beyond the adapters' own matrix products.
   */
  #useAdapters(adapters: AdapterSet): void {
    if (adapters.key === this.#adapters) return;
    this.#native.setLoras(adapters.adapters, adapters.scales);
    this.#adapters = adapters.key;
  }

  /** Evaluates the image the job's input begins with into its sequence; the job goes on with what follows it. */
  async #evaluateImage(job: Job): Promise<void> {
    this.#take(job);
    if (job.signal?.aborted) return job.fail(job.signal.reason);
    const image = job.images?.at(job.input[0]!);
    if (!image || job.input.length < image.length) return job.fail(new Error("A prompt's image pseudo-tokens name no image of it."));
    const position = job.sequence.tokens.length;
    try {
      this.#useAdapters(job.sequence.adapters);
      await image.evaluate(job.sequence.id, position);
    } catch (error) {
      // What the failed evaluation left of the image in the cache is unknown: it goes.
      this.#truncate(job.sequence, position);
      return job.fail(error);
    }
    job.sequence.tokens.push(...job.input.splice(0, image.length));
    if (job.input.length > 0) this.#ready.unshift(job);
    else if (job.sampleAt === "none") job.done([]);
    else job.fail(new Error("The prompt ends with an image: the model has no text after it to answer from."));
  }

  /**
   * The batch (generations only, all sampled natively) and then up to `ahead` more steps of the
   * same sequences in modelhost's native loop: the first step's tokens are handed over at once,
   * later steps' a few at a time (held up to `holdMs`), while the next decodes. The loop stops when
   * a job does not come back for its next token (it ended, or its consumer stopped), when other
   * work arrives, and after its time slice when other work waits for the decode thread; a step it
   * decoded for a job that did not ask is a real continuation, kept in the cache and otherwise
   * dropped (the job's sampler is not used again).
   */
  async #generate(steps: NativeSteps, batch: BatchItem[], batchIndexes: Uint32Array[], ahead: number): Promise<void> {
    const jobs = batch.map(({ job }) => job);
    const control = Int32Array.of(0, this.#holdUs);
    this.#looping = { jobs: new Set(jobs), control };
    // Each sequence's last sampled token: the input of its next step.
    const previous = new Array<number>(batch.length);
    // The jobs still asking for tokens.
    const active = new Set(jobs);
    let step = 0;
    let fault: { error: unknown } | undefined;
    // Every step decoded since the last call: batch.length tokens a step.
    const onSteps = (tokens: Int32Array) => {
      try {
        for (let at = 0; at < tokens.length; at += batch.length)
          this.#loopStep(batch, tokens.subarray(at, at + batch.length), step++, previous, active);
      } catch (error) {
        control[0] = 1;
        fault ??= { error };
      }
      this.#handOver();
    };
    const endTokens = new Set<number>();
    for (const { job } of batch) for (const token of job.generation!.endTokens) endTokens.add(token);
    try {
      await steps.generate(
        this.#native,
        Int32Array.from(batchIndexes, (indexes) => indexes[0]!),
        jobs.map((job) => job.sampler!),
        Int32Array.from(jobs, (job) => job.sequence.id),
        Int32Array.from(batch, ({ count, position }) => position + count),
        Int32Array.from(endTokens),
        ahead,
        control,
        onSteps,
      );
      if (fault) throw fault.error;
    } catch (error) {
      // What the failed step left in these sequences' caches is unknown: they start afresh.
      for (const job of jobs) {
        this.#take(job);
        this.#truncate(job.sequence, 0);
        if (active.has(job)) job.fail(error);
      }
    } finally {
      this.#looping = undefined;
      this.#handOver();
      for (const job of jobs) job.released?.();
    }
  }

  /** One step of the native loop: its inputs are now in the caches, its tokens go to the jobs that asked. */
  #loopStep(batch: BatchItem[], tokens: Int32Array, step: number, previous: number[], active: Set<Job>): void {
    batch.forEach(({ job, count }, i) => {
      const token = tokens[i]!;
      let asked = true;
      if (step === 0) {
        job.sequence.tokens.push(...job.input.splice(0, count));
      } else {
        job.sequence.tokens.push(previous[i] as Token);
        // It asked for this step if it came back to the queue with the token as its input.
        asked = this.#take(job);
        if (asked) job.input.length = 0;
      }
      previous[i] = token;
      if (!active.has(job)) return;
      if (!asked) {
        active.delete(job);
        return;
      }
      if (token === -1) job.fail(new Error("llama.cpp could not sample a token (no candidate survived the sampler chain)"));
      else job.done([{ token: token as Token }]);
      // Ended, stopped or failed: the loop must not decode ahead for it.
      if (!this.#ready.includes(job)) {
        active.delete(job);
        this.yieldLoop();
      }
    });
  }

  /**
   * The drafts of this step's generations (those with the step's adapters) that draft: each drafts
   * unless something makes its next token a step of its own (it is behind, or its sampler changes
   * after this token). A promise only when a drafter's is (a draft model's), so that n-gram steps
   * start their decode before their first await (see #loop).
   */
  #drafts(adapters: AdapterSet): Map<Job, Token[]> | Promise<Map<Job, Token[]>> | undefined {
    const proposals: Array<[Job, Token[] | Promise<Token[]>]> = [];
    for (const job of this.#ready) {
      const generation = job.generation;
      if (!generation?.drafter || job.input.length !== 1 || job.sampleAt !== "last" || job.input[0]! < 0) continue;
      if (job.sequence.adapters.key !== adapters.key || job.signal?.aborted) continue;
      const room = Math.min(this.#batchSize - 1, generation.ahead());
      if (room > 0) proposals.push([job, generation.drafter.draft(job.sequence.tokens, job.input[0]!, room)]);
    }
    if (proposals.length === 0) return undefined;
    if (!proposals.some(([, draft]) => draft instanceof Promise)) return new Map(proposals as Array<[Job, Token[]]>);
    return Promise.all(proposals.map(async ([job, draft]) => [job, await draft] as const)).then((all) => new Map(all));
  }

  /**
   * Speculative decoding's check, as llama.cpp's (common_sampler_sample_and_accept_n): the
   * generation's sampler samples each position in turn, from the logits after its own token and
   * then after each drafted one, and goes on while it samples the drafted token. So every token
   * is sampled once, from the logits of the tokens really before it, by the sampler in the state
   * those tokens left it in (penalties, grammar, random state): what is written is what would be
   * without a draft. (For a draft that proposes one token for sure, this is the standard
   * acceptance rule: accepted with probability p(token), and else a sample from p without it.)
   * A token after which the step must end (an end, or one whose next token is sampled alone)
   * ends the check.
   */
  async #verify(job: Job, draft: readonly Token[], batchIndexes: Uint32Array): Promise<Sampled[]> {
    const results: Sampled[] = [];
    for (let i = 0; i <= draft.length; i++) {
      const sampled = await this.#sampleOne(batchIndexes[i]!, job.sampler!, job.metadata);
      results.push(sampled);
      if (i === draft.length || sampled.token !== draft[i] || job.generation!.stops(sampled.token)) break;
    }
    job.generation!.drafter!.record(draft.length, results.length - 1);
    return results;
  }

  async #sample(job: Job, batchIndexes: Uint32Array): Promise<Sampled[]> {
    const { sampler } = job;
    if (!sampler || batchIndexes.length === 0) return [];
    const results: Sampled[] = [];
    // One position at a time: each sample is accepted into the sampler's state before the next.
    for (const index of batchIndexes) results.push(await this.#sampleOne(index, sampler, job.metadata));
    return results;
  }

  async #sampleOne(batchIndex: number, sampler: NativeSampler, metadata: Job["metadata"]): Promise<Sampled> {
    if (!metadata) return { token: checked(await this.#native.sampleToken(batchIndex, sampler)) };
    const [token, probabilities, confidence] = await this.#native.sampleToken(batchIndex, sampler, metadata.probabilities, true);
    const distribution = probabilityMap(probabilities);
    return {
      token: checked(token),
      ...(distribution ? { probabilities: distribution } : {}),
      ...(confidence === undefined ? {} : { confidence }),
    };
  }
}

function checked(token: number): Token {
  if (token === -1) throw new Error("llama.cpp could not sample a token (no candidate survived the sampler chain)");
  return token as Token;
}

/**
 * One generation's side of the pipeline: sampled tokens wait here (at most one, as the sequence
 * sits out steps until it is taken) for the consumer's `next`.
 */
class Generation {
  readonly #decoder: BatchDecoder;
  readonly #setup: GenerationSetup;
  readonly #job: Job;
  readonly #waiting: Sampled[] = [];
  #consumer: { resolve(value: Sampled | undefined): void; reject(error: unknown): void } | undefined;
  /** The next step's input, held back while a token waits for the consumer. */
  #heldInput: Token | undefined;
  /** Queued or decoding: a step for this generation is under way. */
  #inStep = false;
  /** Tokens sampled so far. */
  #sampled = 0;
  /** The next token is sampled in a step of its own (GenerationSetup.sampled). */
  #alone = false;
  #settled: (() => void) | undefined;
  #finished = false;
  #error: unknown;

  constructor(
    decoder: BatchDecoder,
    sequence: DecoderSequence,
    input: readonly Token[],
    setup: GenerationSetup,
    signal: AbortSignal | undefined,
  ) {
    this.#decoder = decoder;
    this.#setup = setup;
    this.#job = {
      sequence,
      input: [...input],
      sampleAt: "last",
      images: setup.images,
      sampler: setup.sampler,
      ...(setup.metadata ? { metadata: setup.metadata } : {}),
      signal,
      done: (results) => {
        // Drafted tokens the model accepted come before the step's last token.
        for (const accepted of results.slice(0, -1)) this.#onAccepted(accepted);
        this.#onSampled(results.at(-1)!);
      },
      fail: (error) => this.#onFailed(error),
      generation: {
        // A consumer this far behind waits for its next token in a step of its own, which holds
        // the token back (a loop would decode on for it).
        ahead: () => (this.#finished || this.#alone || this.#waiting.length >= MAX_TOKENS_AHEAD - 1 ? 0 : setup.limit - this.#sampled - 1),
        endTokens: Int32Array.from(setup.endTokens ?? []),
        ...(setup.drafter ? { drafter: setup.drafter } : {}),
        stops: (token) => this.#alone || setup.isLast(token) || (setup.endTokens?.includes(token) ?? false),
      },
      released: () => this.#settle(),
    };
  }

  async *iterate(): AsyncGenerator<Sampled, void, undefined> {
    this.#start();
    try {
      for (;;) {
        const next = await this.#take();
        if (next === undefined) return;
        yield next;
      }
    } finally {
      this.#finished = true;
      // Still queued: simply dropped. Decoding (or decoded ahead by a native loop): wait until
      // that is over.
      if (this.#decoder.withdraw(this.#job)) this.#inStep = false;
      if (this.#busy()) await new Promise<void>((resolve) => (this.#settled = resolve));
    }
  }

  #start(): void {
    this.#inStep = true;
    this.#decoder.enqueue(this.#job);
  }

  #take(): Promise<Sampled | undefined> {
    const waiting = this.#waiting.shift();
    if (waiting) {
      if (this.#heldInput !== undefined) {
        this.#job.input = [this.#heldInput];
        this.#heldInput = undefined;
        this.#start();
      }
      return Promise.resolve(waiting);
    }
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (!this.#inStep) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => (this.#consumer = { resolve, reject }));
  }

  /**
   * A drafted token the model wrote, ahead of the step's last: taken as a sampled token that does
   * not end the generation (the check stops at one that would, and at the limit).
   */
  #onAccepted(sampled: Sampled): void {
    this.#sampled++;
    this.#alone = this.#setup.sampled?.(sampled.token) ?? false;
    const consumer = this.#consumer;
    this.#consumer = undefined;
    if (consumer) this.#decoder.handOverLater(() => consumer.resolve(sampled));
    else this.#waiting.push(sampled);
  }

  #onSampled(sampled: Sampled): void {
    this.#inStep = false;
    this.#sampled++;
    this.#alone = this.#setup.sampled?.(sampled.token) ?? false;
    const continues = !this.#finished && this.#sampled < this.#setup.limit && !this.#setup.isLast(sampled.token);
    const consumer = this.#consumer;
    this.#consumer = undefined;
    if (consumer) {
      // Taken at once: the next step starts before the consumer has even looked at it.
      if (continues) {
        this.#job.input = [sampled.token];
        this.#start();
      }
      this.#decoder.handOverLater(() => consumer.resolve(sampled));
    } else {
      this.#waiting.push(sampled);
      if (continues) {
        // Behind: decoding goes on up to MAX_TOKENS_AHEAD tokens waiting. A native loop decoding this
        // sequence ahead is asked to stop there, and what it decodes meanwhile is still this
        // generation's (its sampler has taken each token), so it keeps coming back for them.
        if (this.#waiting.length < MAX_TOKENS_AHEAD || this.#decoder.looping(this.#job)) {
          this.#job.input = [sampled.token];
          this.#start();
        } else {
          this.#heldInput = sampled.token;
        }
        if (this.#waiting.length >= MAX_TOKENS_AHEAD) this.#decoder.yieldLoop();
      }
    }
    this.#settle();
  }

  #onFailed(error: unknown): void {
    this.#inStep = false;
    this.#error = error;
    const consumer = this.#consumer;
    this.#consumer = undefined;
    consumer?.reject(error);
    this.#settle();
  }

  #busy(): boolean {
    return this.#inStep || this.#decoder.looping(this.#job);
  }

  #settle(): void {
    if (this.#busy()) return;
    const settled = this.#settled;
    this.#settled = undefined;
    settled?.();
  }
}
