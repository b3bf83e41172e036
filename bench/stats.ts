export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One generation as seen by its consumer. */
export interface StreamSample {
  /** ms from sending the request (or starting evaluation) to the first token. */
  ttftMs: number;
  /** Tokens generated. */
  tokens: number;
  /** ms from the first token to the last. */
  decodeMs: number;
  /** Tokens of the prompt as the server counted them (its usage), when it says. */
  promptTokens?: number;
}

/** Decode speed of one stream: tokens after the first over the time they took. */
export function decodeRate(sample: StreamSample): number {
  return sample.tokens > 1 ? ((sample.tokens - 1) * 1000) / sample.decodeMs : NaN;
}

/** Aggregate speed of concurrent streams: all tokens over the wall time from the earliest start. */
export function aggregateRate(samples: readonly StreamSample[], wallMs: number): number {
  const tokens = samples.reduce((sum, sample) => sum + sample.tokens, 0);
  return (tokens * 1000) / wallMs;
}
