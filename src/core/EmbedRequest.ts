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
  /** Scale vectors to unit length (the default); false returns the model's raw pooled vectors. */
  normalize?: boolean;
}

export interface EmbedResult {
  /** One vector per input, in input order: unit length (L2-normalised) unless the request said otherwise. */
  vectors: Float32Array[];
  /** Tokens evaluated, special tokens included. */
  promptTokens: number;
  /** Time spent loading the model for this request, in ms; 0 when it was resident. */
  loadMs: number;
}
