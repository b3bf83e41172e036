// The weights that make the thinking test model think: a fixed thought, opened and closed with
// Qwen3's markers, which greedy decoding writes at the start of every reply.
import type { GgufTensor } from "../gguf/GgufWriter.js";
import { editedTensor } from "./modelWriterParts.js";
import { TokenType, type TestVocabulary } from "./testVocabulary.js";

/** Qwen3's thought markers, added as plain-text (user-defined) tokens, as Qwen3 has them. */
const THOUGHT_OPEN = "<think>";
const THOUGHT_CLOSE = "</think>";

/**
 * Each token, when it is the current one, makes the next one certain: the generation prompt ends
 * with a newline ("Ċ"), so a reply opens a thought, writes "The river was there" and closes it;
 * after that the model writes free (random) text as the other test models do. In byte symbols.
 */
const CHAIN = ["Ċ", THOUGHT_OPEN, "The", "Ġriver", "Ġwas", "Ġthere", THOUGHT_CLOSE] as const;

/** The thought the chain writes, as a client reads it. */
export const TEST_MODEL_THOUGHT = "The river was there";

/**
 * Value of a link's own dimension in its source token's embedding, and the output weight that
 * reads it. The other embedding values are about ±1 (std 1) and the random logits have a standard
 * deviation of about 8, their maximum over the vocabulary about 25; a flag of 8 is about 5.8 after
 * the final RMS norm, so the next link's logit is about 58: greedy decoding picks it always, and
 * sampling at temperature 1 all but always.
 */
const FLAG = 8;
const LINK_WEIGHT = 10;

/** The vocabulary with the two markers added after its other tokens (existing ids unchanged). */
export function withThoughtTokens(vocabulary: TestVocabulary): TestVocabulary {
  return {
    ...vocabulary,
    tokens: [...vocabulary.tokens, THOUGHT_OPEN, THOUGHT_CLOSE],
    tokenTypes: [...vocabulary.tokenTypes, TokenType.userDefined, TokenType.userDefined],
  };
}

/**
 * Wires the chain into a llama model's weights. Link i has its own dimension of the hidden state,
 * one of the last `CHAIN.length - 1`: only the link's source token has a value there (in its
 * embedding), no block writes there (their output rows for those dimensions are zero), so the
 * final hidden state has the flag exactly when the source token is the current one; and only the
 * link's target reads it (output weights). The chain's tokens after the first are silenced
 * otherwise (output rows zero, as the control tokens are), and the newline too, so none of them
 * is written in free text and the thought is written exactly once, at the start.
 */
export function thoughtWiring(vocabulary: TestVocabulary, hidden: number) {
  const idOf = (token: string) => {
    const id = vocabulary.tokens.indexOf(token);
    if (id < 0) throw new Error(`The thought chain's token ${token} is not in the vocabulary.`);
    return id;
  };
  const links = CHAIN.slice(1).map((target, i) => ({
    source: idOf(CHAIN[i]!),
    target: idOf(target),
    dimension: hidden - CHAIN.length + 1 + i,
  }));
  const reserved = links.map((link) => link.dimension);
  /** Rows of `width` values, one per token (embedding and output matrices). */
  const forEachRow = (values: Float32Array, width: number, visit: (row: Float32Array, id: number) => void) => {
    for (let id = 0; id < values.length / width; id++) visit(values.subarray(id * width, (id + 1) * width), id);
  };
  return {
    embedding: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) =>
        forEachRow(values, hidden, (row, id) => {
          for (const dimension of reserved) row[dimension] = 0;
          for (const link of links) if (link.source === id) row[link.dimension] = FLAG;
        }),
      ),
    /** An attention output or feed-forward down projection ([inputs, hidden]): nothing written to the links' dimensions. */
    residualWriter: (tensor: GgufTensor, inputs: number) =>
      editedTensor(tensor, (values) => {
        for (const dimension of reserved) values.fill(0, dimension * inputs, (dimension + 1) * inputs);
      }),
    output: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const silenced = new Set([idOf("Ċ"), ...links.map((link) => link.target)]);
        forEachRow(values, hidden, (row, id) => {
          if (silenced.has(id)) row.fill(0);
          for (const dimension of reserved) row[dimension] = 0;
          for (const link of links) if (link.target === id) row[link.dimension] = LINK_WEIGHT;
        });
      }),
  };
}
