import { resolveChatWrapper, type Llama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import type { StreamSample } from "./stats.js";

/**
 * node-llama-cpp used directly, the way its documentation shows: one context with N sequences,
 * `sequence.evaluate()` per stream. The HTTP numbers are compared with this.
 */
export class InProcessRunner {
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;

  private constructor(model: LlamaModel, context: LlamaContext) {
    this.#model = model;
    this.#context = context;
  }

  static async load(llama: Llama, modelPath: string, options: { threads: number; sequences: number; contextSize: number }) {
    const model = await llama.loadModel({ modelPath });
    const context = await model.createContext({
      sequences: options.sequences,
      contextSize: options.contextSize,
      threads: { ideal: options.threads, min: options.threads },
    });
    return new InProcessRunner(model, context);
  }

  /** The prompt tokens of a one-message chat, rendered with the model's template as the server does. */
  promptTokens(userMessage: string): Token[] {
    const wrapper = resolveChatWrapper(this.#model, { warningLogs: false });
    const state = wrapper.generateContextState({
      chatHistory: [
        { type: "user", text: userMessage },
        { type: "model", response: [] },
      ],
    });
    return state.contextText.tokenize(this.#model.tokenizer);
  }

  /** Runs `count` generations at once, each on its own sequence, each up to maxTokens. */
  async run(prompts: Token[][], maxTokens: number): Promise<StreamSample[]> {
    const sequences = prompts.map(() => this.#context.getSequence());
    try {
      return await Promise.all(
        prompts.map(async (tokens, i) => {
          const sequence = sequences[i]!;
          const started = performance.now();
          let first: number | undefined;
          let last = started;
          let count = 0;
          for await (const _token of sequence.evaluate(tokens, { temperature: 0 })) {
            last = performance.now();
            first ??= last;
            if (++count >= maxTokens) break;
          }
          return { ttftMs: (first ?? last) - started, tokens: count, decodeMs: last - (first ?? last) };
        }),
      );
    } finally {
      for (const sequence of sequences) sequence.dispose();
    }
  }

  async dispose(): Promise<void> {
    await this.#context.dispose();
    await this.#model.dispose();
  }
}
