import { createHash } from "node:crypto";

/** One upstream inference server of a pool, as the operator declares it (issue 34). */
export interface EndpointSpec {
  /** Its OpenAI-compatible base URL, e.g. http://10.0.0.5:8080/v1. */
  url: string;
  /** What errors call it (default: its place in the pool, #1, #2, …): not its URL, which clients are not told. */
  name?: string;
  /** Sent as `Authorization: Bearer …`; absent, none. */
  key?: string;
  /** Its share of the pool's requests, relative to the others' (a GPU twice as fast: 2). Default 1. */
  weight: number;
  /** The most requests it is sent at once (its slots); more wait or go elsewhere. */
  maxConcurrent: number;
}

export interface Endpoint {
  readonly spec: EndpointSpec;
  /** Requests sent to it and not yet ended. */
  readonly inFlight: number;
  /** Taken out after failures (passive health), until `retryAt`. */
  readonly down: boolean;
}

/**
 * What `pick` chose, and whether it is the endpoint the conversation's hash prefers (an affinity
 * hit); undefined under round-robin, where no endpoint is preferred (the metrics count no hit or miss).
 */
export interface Pick {
  endpoint: Endpoint;
  preferred: boolean | undefined;
}

/**
 * How a pool picks an endpoint: `affinity` keeps a conversation on the endpoint that holds its
 * prompt cache; `round-robin` takes the endpoints in turn, as an ordinary load balancer does (for
 * pools whose requests share nothing worth caching, and the baseline affinity is measured against).
 */
export type Routing = "affinity" | "round-robin";

export interface PoolOptions {
  /** Default `affinity`. */
  routing?: Routing;
  /**
   * How far above its fair share of the requests in flight an endpoint may go before a
   * conversation that prefers it goes to the next one on the ring (bounded-load consistent
   * hashing, Mirrokni, Thorup and Zadimoghaddam 2018): 1.25 keeps every endpoint within 25% of
   * the mean, while a conversation moves only when its endpoint is that far ahead.
   */
  loadFactor?: number;
  /** Ring points per unit of weight: 100 spreads keys within a few percent of the weights. */
  pointsPerWeight?: number;
  /** Consecutive failures that take an endpoint out. */
  failuresToEject?: number;
  /** How long an endpoint stays out after its failures, doubling on each failed retry, at most 8 times. */
  ejectMs?: number;
  now?: () => number;
}

interface State extends Endpoint {
  inFlight: number;
  down: boolean;
  /** Out by a failed active health check: no request tries it (half-open) until a check passes. */
  held: boolean;
  failures: number;
  ejections: number;
  retryAt: number;
  /** Round-robin's running credit (smooth weighted round-robin). */
  credit: number;
}

/**
 * The endpoints serving one model, and the choice of one per request: a conversation goes to the
 * endpoint its key hashes to on a consistent-hash ring, which holds its prompt cache, unless that
 * endpoint is down, at its concurrency cap, or above its bounded share of the load; then to the
 * next one along the ring. A request without a conversation key goes to the endpoint with the
 * fewest requests in flight for its weight. Endpoints that fail `failuresToEject` times in a row
 * are taken out for `ejectMs`, then tried again with one request (half-open), as circuit breakers do.
 * With `routing: "round-robin"` every request, keyed or not, goes to the next usable endpoint in
 * turn, weighted (nginx's smooth weighted round-robin).
 */
export class EndpointPool {
  readonly #states: State[];
  /** Ring points, sorted by hash: [hash, endpoint index]. */
  readonly #ring: Array<readonly [number, number]>;
  readonly #routing: Routing;
  readonly #loadFactor: number;
  readonly #failuresToEject: number;
  readonly #ejectMs: number;
  readonly #now: () => number;
  /** Rotates ties among equally loaded endpoints. */
  #turn = 0;

  constructor(specs: readonly EndpointSpec[], options: PoolOptions = {}) {
    if (specs.length === 0) throw new Error("A pool needs at least one endpoint.");
    this.#states = specs.map((spec) => ({
      spec,
      inFlight: 0,
      down: false,
      held: false,
      failures: 0,
      ejections: 0,
      retryAt: 0,
      credit: 0,
    }));
    this.#routing = options.routing ?? "affinity";
    this.#loadFactor = options.loadFactor ?? 1.25;
    this.#failuresToEject = options.failuresToEject ?? 3;
    this.#ejectMs = options.ejectMs ?? 5_000;
    this.#now = options.now ?? Date.now;
    const points = options.pointsPerWeight ?? 100;
    this.#ring = specs
      .flatMap((spec, index) =>
        Array.from({ length: Math.max(1, Math.round(points * spec.weight)) }, (_, i) => [hash32(`${spec.url}#${i}`), index] as const),
      )
      .sort((a, b) => a[0] - b[0]);
  }

  get endpoints(): readonly Endpoint[] {
    return this.#states;
  }

  /**
   * An endpoint for the next request (its in-flight count taken: `end` gives it back), or undefined
   * when every one is down or at its cap. `affinity`: the conversation's key; `exclude`: endpoints
   * already tried for this request.
   */
  pick(affinity?: string, exclude: ReadonlySet<Endpoint> = new Set()): Pick | undefined {
    this.#readmit();
    const usable = (state: State) => !state.down && !exclude.has(state) && state.inFlight < state.spec.maxConcurrent;
    const chosen =
      this.#routing === "round-robin"
        ? this.#inTurn(usable)
        : affinity === undefined
          ? this.#leastLoaded(usable)
          : this.#alongRing(affinity, usable);
    if (!chosen) return undefined;
    chosen.state.inFlight++;
    return { endpoint: chosen.state, preferred: chosen.preferred };
  }

  /** The request sent to `endpoint` has ended; `ok`: it answered (a 4xx the client caused is an answer). */
  end(endpoint: Endpoint, ok: boolean): void {
    const state = endpoint as State;
    state.inFlight = Math.max(0, state.inFlight - 1);
    if (ok) {
      state.failures = 0;
      state.ejections = 0;
      return;
    }
    state.failures++;
    // A retry after an ejection that fails again goes out at once, for twice as long.
    if (state.failures >= this.#failuresToEject || state.ejections > 0) this.#eject(state);
  }

  /**
   * Takes an endpoint out now, and keeps it out until `markUp` (an active health check failed): its
   * passive time out ending does not let a request try it, as a hung endpoint would hold that
   * request for the whole first-byte timeout. Called again while it is out, it changes nothing.
   */
  markDown(endpoint: Endpoint): void {
    const state = endpoint as State;
    if (!state.held) this.#eject(state);
    state.held = true;
  }

  /**
   * Puts back an endpoint a health check took out (`markDown`), now that one passed. One that
   * failed requests took out stays out until its own retry: answering `GET /models` says nothing
   * of the chat requests it failed (a server up with a broken model), and putting it back at each
   * check would fail three requests there every interval.
   */
  markUp(endpoint: Endpoint): void {
    const state = endpoint as State;
    if (!state.held) return;
    Object.assign(state, { down: false, held: false, failures: 0, ejections: 0, retryAt: 0 });
  }

  #eject(state: State): void {
    state.down = true;
    state.retryAt = this.#now() + this.#ejectMs * 2 ** Math.min(state.ejections, 8);
    state.ejections++;
    state.failures = 0;
  }

  /**
   * Endpoints whose time out is over are tried again (their next failure takes them out at once),
   * but not those a failed health check holds out.
   */
  #readmit(): void {
    const now = this.#now();
    for (const state of this.#states) if (state.down && !state.held && now >= state.retryAt) state.down = false;
  }

  #leastLoaded(usable: (state: State) => boolean): { state: State; preferred: boolean } | undefined {
    let best: State | undefined;
    const count = this.#states.length;
    this.#turn = (this.#turn + 1) % count;
    for (let i = 0; i < count; i++) {
      const state = this.#states[(this.#turn + i) % count]!;
      if (!usable(state)) continue;
      if (!best || (state.inFlight + 1) / state.spec.weight < (best.inFlight + 1) / best.spec.weight) best = state;
    }
    return best && { state: best, preferred: false };
  }

  /**
   * Smooth weighted round-robin (nginx's): each usable endpoint gains its weight in credit, the
   * richest is chosen and pays the sum of the weights. Weights 2 and 1 give a, b, a, a, b, a…:
   * each endpoint's share is its weight's, interleaved rather than in runs. Endpoints down or at
   * their cap are skipped and gain nothing, so one that comes back does not get a burst.
   */
  #inTurn(usable: (state: State) => boolean): { state: State; preferred: undefined } | undefined {
    let best: State | undefined;
    let total = 0;
    for (const state of this.#states) {
      if (!usable(state)) continue;
      state.credit += state.spec.weight;
      total += state.spec.weight;
      if (!best || state.credit > best.credit) best = state;
    }
    if (!best) return undefined;
    best.credit -= total;
    return { state: best, preferred: undefined };
  }

  /**
   * The first endpoint along the ring from the key's hash that is usable and under its bound:
   * `loadFactor` × its weight's share of the requests in flight with this one, rounded up.
   */
  #alongRing(key: string, usable: (state: State) => boolean): { state: State; preferred: boolean } | undefined {
    const live = this.#states.filter((state) => !state.down);
    const totalWeight = live.reduce((sum, state) => sum + state.spec.weight, 0);
    const inFlight = live.reduce((sum, state) => sum + state.inFlight, 0) + 1;
    const bound = (state: State) => Math.ceil((this.#loadFactor * inFlight * state.spec.weight) / totalWeight);
    const start = this.#firstPointAtOrAfter(hash32(key));
    const seen = new Set<number>();
    let preferred: number | undefined;
    for (let i = 0; i < this.#ring.length && seen.size < this.#states.length; i++) {
      const index = this.#ring[(start + i) % this.#ring.length]![1];
      if (seen.has(index)) continue;
      seen.add(index);
      const state = this.#states[index]!;
      // The conversation's own endpoint is the first live one on the ring, whatever its load.
      if (!state.down) preferred ??= index;
      if (usable(state) && state.inFlight < bound(state)) return { state, preferred: index === preferred };
    }
    // All above their bound (a burst): the least loaded usable one.
    return this.#leastLoaded(usable);
  }

  #firstPointAtOrAfter(point: number): number {
    let low = 0;
    let high = this.#ring.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#ring[middle]![0] < point) low = middle + 1;
      else high = middle;
    }
    return low % this.#ring.length;
  }
}

/** The first 32 bits of the SHA-256 of `text`: ring points and keys spread evenly whatever their text. */
function hash32(text: string): number {
  return createHash("sha256").update(text).digest().readUInt32BE(0);
}
