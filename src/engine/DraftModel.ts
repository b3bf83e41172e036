import type { Llama, LlamaContext, LlamaModel, Token } from "node-llama-cpp";
import type { EngineCounters, ModelInfo } from "../core/ModelInfo.js";
import { ServerError } from "../core/ServerError.js";
import { checkModelFile } from "../models/checkModelFile.js";
import { BatchDecoder, DecoderSequence, type Drafter } from "./BatchDecoder.js";
import { createNativeSampler, nativeContextOf, nativeSteps, sequenceIdOf, type NativeSampler } from "./llamaInternals.js";
import { DraftLength } from "./DraftLength.js";

/** What a draft model's context is sized by: its target's. */
export interface DraftRuntimeOptions {
  contextSize: number;
  parallel: number;
  batchSize: number;
  threads: number;
}

/**
 * A small model of its target's vocabulary, loaded beside it to draft for it (speculative
 * decoding, as llama-server's --model-draft): one sequence per target sequence on a context of
 * its own, decoded by a BatchDecoder of its own, so the drafts of all the target's generations are
 * decoded together, one batch a drafted token. Each drafting sequence holds its generation's
 * tokens as the target accepted them: a draft it made that the target rejected is dropped from its
 * cache at the next draft (keepPrefix), so it only ever decodes what is new.
 */
export class DraftModel {
  readonly info: ModelInfo;
  readonly #model: LlamaModel;
  readonly #decoder: BatchDecoder;
  readonly #free: DecoderSequence[];

  private constructor(info: ModelInfo, model: LlamaModel, context: LlamaContext, options: DraftRuntimeOptions) {
    this.info = info;
    this.#model = model;
    // Its tokens go to the drafter, which waits for all of them: nothing is gained by holding
    // steps to hand several over at once (--stream-hold is for HTTP writes).
    this.#decoder = new BatchDecoder(nativeContextOf(context), {
      batchSize: options.batchSize,
      threads: options.threads,
      holdMs: 0,
      native: nativeSteps(model.llama),
    });
    this.#free = Array.from({ length: options.parallel }, () => {
      const sequence = context.getSequence();
      return new DecoderSequence(sequenceIdOf(sequence), sequence);
    });
  }

  /**
   * Loads `info` to draft for `target`: refused (model_load_failed, naming both) when its
   * vocabulary is not the target's, token for token, since its drafts are token ids of the target.
   */
  static async load(
    llama: Llama,
    info: ModelInfo,
    target: LlamaModel,
    targetId: string,
    options: DraftRuntimeOptions,
  ): Promise<DraftModel> {
    await checkModelFile(info.path);
    const model = await llama.loadModel({ modelPath: info.path });
    try {
      const problem = vocabularyMismatch(model, target);
      if (problem !== undefined) {
        throw new ServerError("model_load_failed", {
          model: targetId,
          message: `The model \`${info.id}\` cannot draft for \`${targetId}\`: ${problem}. A draft model must have its target's vocabulary (a smaller model of the same family).`,
        });
      }
      const context = await model.createContext({
        sequences: options.parallel,
        contextSize: Math.min(options.contextSize, model.trainContextSize),
        batchSize: options.batchSize,
        threads: { ideal: options.threads, min: options.threads },
        failedCreationRemedy: false,
        flashAttention: "auto",
      });
      return new DraftModel(info, model, context, options);
    } catch (error) {
      await model.dispose();
      throw error;
    }
  }

  /** A drafter for one generation, with a sequence of its own until `release`; none when all are taken. */
  drafter(maxLength: number, counters: EngineCounters): ModelDrafter | undefined {
    const sequence = this.#free.pop();
    if (!sequence) return undefined;
    const sampler = createNativeSampler(this.#model, { temperature: 0, topK: 1, topP: 1, minP: 0, seed: 0 });
    return new ModelDrafter(this.#decoder, sequence, sampler, maxLength, counters, () => {
      sampler.dispose();
      this.#free.push(sequence);
    });
  }

  async dispose(): Promise<void> {
    await this.#decoder.close(new ServerError("overloaded", { retryAfter: 1, message: "The model is being unloaded. Retry shortly." }));
    await this.#model.dispose();
  }
}

/** Drafts for one generation with the draft model, greedily; its length adapts as DraftLength says. */
export class ModelDrafter extends DraftLength implements Drafter {
  readonly #decoder: BatchDecoder;
  readonly #sequence: DecoderSequence;
  readonly #sampler: NativeSampler;
  readonly #release: () => void;
  #released = false;
  /** A draft under way: the next waits for it (the sequence decodes one at a time). */
  #drafting: Promise<unknown> = Promise.resolve();

  constructor(
    decoder: BatchDecoder,
    sequence: DecoderSequence,
    sampler: NativeSampler,
    maxLength: number,
    counters: EngineCounters,
    release: () => void,
  ) {
    super(maxLength, counters);
    this.#decoder = decoder;
    this.#sequence = sequence;
    this.#sampler = sampler;
    this.#release = release;
  }

  draft(history: readonly Token[], next: Token, room: number): Token[] | Promise<Token[]> {
    const length = this.next(room, history.length);
    // No promise when there is no draft: the step's decode then starts before its first await (BatchDecoder.#loop).
    if (length <= 0 || this.#released) return [];
    const context = [...history, next];
    const drafting = this.#drafting.then(() => this.#run(context, length));
    this.#drafting = drafting.catch(() => undefined);
    // A draft that fails (the draft model unloading, say) is no draft: the target goes on alone.
    return drafting.catch(() => []);
  }

  /** Gives the sequence back once the draft under way is over. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    void this.#drafting.then(() => this.#release());
  }

  async #run(context: readonly Token[], length: number): Promise<Token[]> {
    // What the sequence holds beyond the target's accepted tokens goes; at least `next` is decoded.
    const held = await this.#decoder.keepPrefix(this.#sequence, context, context.length - 1);
    const tokens: Token[] = [];
    const steps = this.#decoder.generate(this.#sequence, context.slice(held), {
      sampler: this.#sampler,
      isLast: () => false,
      limit: length,
    });
    for await (const { token } of steps) {
      tokens.push(token);
      if (tokens.length >= length) break;
    }
    return tokens;
  }
}

/**
 * Why `draft`'s tokens are not `target`'s, or undefined: as llama.cpp's
 * common_speculative_are_compatible, the same vocabulary type and special tokens, and the same
 * text for every token id both have, in sizes at most 128 apart (padding rows).
 */
function vocabularyMismatch(draft: LlamaModel, target: LlamaModel): string | undefined {
  if (draft.vocabularyType !== target.vocabularyType)
    return `its vocabulary is ${draft.vocabularyType}, the target's ${target.vocabularyType}`;
  const texts = [draft, target].map((model) => model.fileInfo.metadata.tokenizer?.ggml?.tokens ?? []) as [
    readonly string[],
    readonly string[],
  ];
  if (Math.abs(texts[0].length - texts[1].length) > 128) return `it has ${texts[0].length} tokens, the target ${texts[1].length}`;
  for (const special of ["bos", "eos"] as const) {
    if (draft.tokens[special] !== target.tokens[special])
      return `its ${special} token is ${draft.tokens[special]}, the target's ${target.tokens[special]}`;
  }
  const shared = Math.min(texts[0].length, texts[1].length);
  for (let token = 0; token < shared; token++) {
    if (texts[0][token] !== texts[1][token])
      return `its token ${token} is ${JSON.stringify(texts[0][token])}, the target's ${JSON.stringify(texts[1][token])}`;
  }
  return undefined;
}
