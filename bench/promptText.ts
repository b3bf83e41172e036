import type { Llama, LlamaModel, Token } from "node-llama-cpp";

// Plain English for prompts of a given length: the count is the model's own tokenizer's, so a
// "2,048-token prompt" is one on every vocabulary (the test models' and 150,000-token ones alike).
const CORPUS = [
  "The harbour town woke slowly. Fishermen checked their nets, the baker opened his shutters, and the ferry sounded its horn twice before leaving for the islands.",
  "A steam engine turns heat into motion: water boils in a closed vessel, the steam pushes a piston, and a crank turns the piston's stroke into the rotation of a wheel.",
  "The report covers the third quarter. Revenue rose by four percent, costs fell in logistics, and the new warehouse in the north opened two weeks ahead of plan.",
  "To install the package, unpack the archive, run the configure script with the prefix of your choice, then build it and copy the binaries into place.",
  "Lighthouse keepers kept a log of every ship that passed, the weather at each watch, and the oil burned by the lamp, night after night for forty years.",
  "The function reads the file line by line, splits each line on commas, converts the third field to a number and sums it, skipping lines that start with a hash.",
].join(" ");

/** Texts of a given number of tokens on one model's vocabulary (loaded vocabulary only). */
export class PromptText {
  readonly #model: LlamaModel;
  readonly #corpus: Token[];

  private constructor(model: LlamaModel) {
    this.#model = model;
    this.#corpus = [...model.tokenize(CORPUS)];
  }

  static async load(llama: Llama, modelPath: string): Promise<PromptText> {
    return new PromptText(await llama.loadModel({ modelPath, vocabOnly: true }));
  }

  count(text: string): number {
    return this.#model.tokenize(text).length;
  }

  /**
   * `label` and then the corpus, over and over, cut to about `tokens` tokens (the cut can shift a
   * token or two when the text is tokenized again). A different label makes a different prompt from
   * its first token, so no server finds any of it in its cache.
   */
  text(tokens: number, label: string): string {
    const head = [...this.#model.tokenize(`${label} `)];
    const body: Token[] = [];
    while (head.length + body.length < tokens) body.push(this.#corpus[body.length % this.#corpus.length]!);
    return this.#model.detokenize([...head, ...body].slice(0, Math.max(tokens, head.length)));
  }

  async dispose(): Promise<void> {
    await this.#model.dispose();
  }
}
