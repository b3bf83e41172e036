import type { EngineCounters } from "../core/ModelInfo.js";

/**
 * How long a generation's next draft is, adapting to what the model accepts, so that drafts that
 * keep failing cost little: a draft checked in the same decode as the sequence's own token costs
 * that decode one more position per drafted token (and a draft model its own decodes); after a
 * draft with nothing accepted the generation waits before it drafts again, twice as long each time
 * it fails in a row (up to MAX_PAUSE steps), and a draft accepted whole doubles the next one's
 * length, up to the most a draft may hold (--draft-max). Keeps the generation's totals and adds
 * them to the engine's.
 */
export class DraftLength {
  readonly #maxLength: number;
  readonly #counters: EngineCounters | undefined;
  #length: number;
  /** The position (of the token a step decodes) from which it drafts again, and the next pause after a failure, in steps. */
  #resumeAt = 0;
  #nextPause = 1;
  /** The position of the last draft's first token's predecessor: where its step decoded. */
  #draftedAt = 0;
  /** Totals for this generation: tokens drafted, and those the model accepted. */
  drafted = 0;
  accepted = 0;

  /** `counters`: the engine's totals, which the drafts add to. */
  constructor(maxLength: number, counters?: EngineCounters) {
    this.#maxLength = maxLength;
    this.#counters = counters;
    this.#length = Math.min(INITIAL_LENGTH, maxLength);
  }

  /** The length of a draft after the token at `position`, at most `room`; 0 while pausing. */
  next(room: number, position: number): number {
    if (position < this.#resumeAt) return 0;
    this.#draftedAt = position;
    return Math.max(0, Math.min(this.#length, room));
  }

  /**
   * How many steps from the one that decodes the token at `position` draft nothing (a pause): the
   * decoder's native loop may decode those without asking.
   */
  idle(position: number): number {
    return Math.max(0, this.#resumeAt - position);
  }

  /** What became of a draft of `drafted` tokens: the first `accepted` of them were the model's own. */
  record(drafted: number, accepted: number): void {
    this.drafted += drafted;
    this.accepted += accepted;
    if (this.#counters) {
      this.#counters.draftTokens += drafted;
      this.#counters.draftTokensAccepted += accepted;
    }
    if (accepted === drafted) {
      this.#length = Math.min(this.#length * 2, this.#maxLength);
      this.#nextPause = 1;
    } else if (accepted === 0) {
      this.#length = Math.max(1, Math.floor(this.#length / 2));
      // The step after this one decodes the token at #draftedAt + 1; the pause skips that many.
      this.#resumeAt = this.#draftedAt + 1 + this.#nextPause;
      this.#nextPause = Math.min(this.#nextPause * 2, MAX_PAUSE);
    } else {
      this.#length = Math.max(1, accepted + 1);
      this.#nextPause = 1;
    }
  }
}

/** A first draft's length: long enough to gain where the copy is real, short enough to lose little where it is not. */
const INITIAL_LENGTH = 4;
/**
 * The longest pause after failures, in steps: a drafter that failed 6 times in a row tries once in
 * 32 steps. A draft model that never agreed then drafted 16 tokens in a 256-token reply, and the
 * reply came as fast as without it (1.01×, bench/results/speculation.json; llama-server, which
 * drafts every step, 0.15×).
 */
const MAX_PAUSE = 32;
