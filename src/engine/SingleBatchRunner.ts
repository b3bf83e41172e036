import type { AdmissionTicket, RequestOptions } from "../core/Engine.js";
import { LazyContextPool } from "./LazyContextPool.js";

/** The sizes of a context that reads each input in one decode call (embeddings, ranking). */
export interface SingleBatchOptions {
  /** Tokens per input, special tokens included: at most one batch, and the model's trained length. */
  contextSize: number;
  threads: number;
  maxQueue: number;
}

/** One input of a request as it will be evaluated, with its length in tokens (special tokens included). */
export interface MeasuredInput<Input> {
  input: Input;
  length: number;
}

/**
 * What the embedding and ranking runners share: one context of their kind, created on the first
 * request and lent to one request at a time (node-llama-cpp reads the pooled output of one sequence
 * per context), the others waiting in line within the model's queue limit. llama.cpp pools the
 * outputs of one decode call, so an input must fit in one batch: the batch is the whole context.
 */
export abstract class SingleBatchRunner<Context> {
  readonly contextSize: number;
  /** The one context, lent to one request at a time: the model counts it in its activity. */
  readonly contexts: LazyContextPool<Context>;

  constructor(
    options: SingleBatchOptions,
    create: (settings: { contextSize: number; batchSize: number; threads: number }) => Promise<Context>,
  ) {
    this.contextSize = options.contextSize;
    this.contexts = new LazyContextPool(
      () => create({ contextSize: options.contextSize, batchSize: options.contextSize, threads: options.threads }),
      options.maxQueue,
    );
  }

  /**
   * A request's inputs evaluated in turn on the context. `measure` sizes them on the context (and
   * refuses one too long, before admission); admission sees their total length; the tokens of the
   * inputs evaluated are settled whether the request ends, fails or is aborted part way.
   */
  protected async evaluateEach<Input, Output>(
    { signal, admit }: RequestOptions,
    measure: (context: Context) => Array<MeasuredInput<Input>>,
    evaluate: (context: Context, input: Input) => Promise<Output>,
  ): Promise<{ outputs: Output[]; promptTokens: number }> {
    const pool = await this.contexts.pool();
    const context = await pool.acquire(signal);
    let ticket: AdmissionTicket | undefined;
    let promptTokens = 0;
    try {
      const inputs = measure(context);
      ticket = await admit?.({ promptTokens: inputs.reduce((sum, { length }) => sum + length, 0), maxOutputTokens: 0 });
      const outputs: Output[] = [];
      for (const { input, length } of inputs) {
        signal.throwIfAborted();
        outputs.push(await evaluate(context, input));
        promptTokens += length;
      }
      return { outputs, promptTokens };
    } finally {
      pool.release(context);
      ticket?.settle({ promptTokens, completionTokens: 0 });
    }
  }
}
