/** One input to embed: text, or the model's own token ids. */
export type EmbedInput = string | readonly number[];

export interface EmbedRequest {
  /** The id or alias the caller asked for; echoed back in replies. */
  model: string;
  inputs: readonly EmbedInput[];
  /** Shorter vectors: the first `dimensions` components, normalised again. */
  dimensions?: number;
  /** Cut inputs longer than the model's context instead of refusing them. */
  truncate: boolean;
}

export interface EmbedResult {
  /** One unit-length (L2-normalised) vector per input, in input order. */
  vectors: Float32Array[];
  /** Tokens evaluated, special tokens included. */
  promptTokens: number;
}
