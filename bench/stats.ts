export function mean(values: readonly number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

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
  /** Of those, the ones it found in its prompt cache (usage.prompt_tokens_details.cached_tokens), when it says. */
  cachedTokens?: number;
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

/**
 * A seeded pseudo-random generator (mulberry32): the same seed gives every target the same
 * arrivals and the same prompt lengths, so two servers in one run see identical schedules.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Send times, in ms from the start, of `count` requests arriving as a Poisson process of
 * `ratePerSecond`: exponential gaps of mean 1/rate, as vLLM's `bench serve --request-rate` draws them.
 */
export function poissonArrivals(ratePerSecond: number, count: number, seed: number): number[] {
  if (!(ratePerSecond > 0)) throw new Error(`a Poisson rate must be positive, not ${ratePerSecond}`);
  const random = seededRandom(seed);
  const times: number[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    // 1 - u is in (0, 1]: the logarithm stays finite.
    at += (-Math.log(1 - random()) / ratePerSecond) * 1000;
    times.push(at);
  }
  return times;
}

/**
 * Mean inter-token latency of one stream: its decode time over the gaps between its tokens (vLLM's
 * TPOT). Per stream rather than per chunk: modelhost holds steps together (`--stream-hold`) and
 * sends several tokens in one chunk, so gaps between chunks would not be gaps between tokens.
 */
export function interTokenLatency(sample: StreamSample): number {
  return sample.tokens > 1 ? sample.decodeMs / (sample.tokens - 1) : NaN;
}

/** Service-level targets of goodput: a request counts when it meets both. */
export interface GoodputTargets {
  ttftMs: number;
  itlMs: number;
}

/**
 * Goodput in the manner of vLLM's `bench serve --goodput ttft:<ms> tpot:<ms>`: requests that met
 * every target, per second of the whole run (first send to last reply).
 */
export function goodput(
  samples: readonly StreamSample[],
  targets: GoodputTargets,
  durationMs: number,
): { good: number; perSecond: number } {
  // A one-token reply has no inter-token latency to miss.
  const good = samples.filter((s) => s.ttftMs <= targets.ttftMs && !(interTokenLatency(s) > targets.itlMs)).length;
  return { good, perSecond: (good * 1000) / durationMs };
}
