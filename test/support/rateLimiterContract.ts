// The behaviour every RateLimiter backend must share, run against each one by its own test file:
// test/access/sqliteRateLimiter.test.ts (needs nothing) and redisRateLimiter.test.ts (needs redis-server).
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Admission, LimitPolicy, RateLimiter, Reservation } from "../../src/access/RateLimiter.js";

export const DAY_MS = 86_400_000;

/** One limiter backend as the contract tests drive it. */
export interface Backend {
  /** The sliding window's length here. */
  minuteMs: number;
  reservationTtlMs: number;
  /** A holder's lease here, shorter than reservationTtlMs: what releases a dead holder's reservations is its lease. */
  leaseMs: number;
  /** A limiter on this backend's shared counters; each call is another process or replica (another holder). */
  open(): Promise<RateLimiter>;
  /** The limiter's clock now. */
  now(): number;
  /** Lets time pass: the injected clock moves (SQLite), or the test really waits (Redis). */
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function admitMany(limiters: RateLimiter[], count: number, key: string, policy: LimitPolicy, tokens: number): Promise<Admission[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => limiters[i % limiters.length]!.admit(key, policy, tokens)));
}

function reservationsOf(admissions: Admission[]): Reservation[] {
  return admissions.flatMap((admission) => (admission.allowed ? [admission.reservation] : []));
}

function refusalsOf(admissions: Admission[]) {
  return admissions.flatMap((admission) => (admission.allowed ? [] : [admission]));
}

export function admitted(admission: Admission): Reservation {
  if (!admission.allowed) throw new Error(`refused: ${admission.limit}`);
  return admission.reservation;
}

function secondsUntilUtcMidnight(ms: number): number {
  return (DAY_MS - (ms % DAY_MS)) / 1000;
}

/** The contract: `create` makes a fresh backend for each test; `skip` when its server is not installed. */
export function describeRateLimiterContract(name: string, create: () => Promise<Backend>, { skip = false } = {}): void {
  describe.skipIf(skip)(`${name} rate limiter`, () => {
    let backend: Backend;
    let limiter: RateLimiter;
    let key: string;

    beforeEach(async () => {
      backend = await create();
      limiter = await backend.open();
      key = `account-${randomUUID()}`;
    });
    afterEach(async () => {
      await backend.close();
    });

    it("admits exactly the per-minute limit out of 100 concurrent requests", async () => {
      const admissions = await admitMany([limiter], 100, key, { requestsPerMinute: 15 }, 1);

      const reservations = reservationsOf(admissions);
      expect(reservations).toHaveLength(15);
      const remaining = admissions.flatMap((admission) => (admission.allowed ? [admission.state.requests?.remaining] : []));
      expect(remaining.sort((a, b) => a! - b!)).toEqual(Array.from({ length: 15 }, (_, i) => i));
      const refusals = refusalsOf(admissions);
      expect(refusals).toHaveLength(85);
      for (const refusal of refusals) {
        expect(refusal.limit).toBe("requests_per_minute");
        expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
        expect(refusal.retryAfterSeconds).toBeLessThanOrEqual(Math.ceil(backend.minuteMs / 1000));
        expect(refusal.state.requests?.remaining).toBe(0);
      }
    });

    it("slides its window: a burst half a window after a full one is refused, one window after it is admitted", async () => {
      const policy = { requestsPerMinute: 5 };
      expect(reservationsOf(await admitMany([limiter], 5, key, policy, 1))).toHaveLength(5);

      // For SQLite this crosses a minute boundary: a fixed window would admit 5 more here.
      await backend.advance(backend.minuteMs / 2);
      const halfway = await admitMany([limiter], 5, key, policy, 1);
      expect(reservationsOf(halfway)).toHaveLength(0);
      for (const refusal of refusalsOf(halfway)) {
        expect(refusal.limit).toBe("requests_per_minute");
        // Until the first burst leaves the window: the other half.
        expect(refusal.retryAfterSeconds).toBe(Math.ceil(backend.minuteMs / 2000));
      }

      await backend.advance(backend.minuteMs * 0.55);
      expect(reservationsOf(await admitMany([limiter], 5, key, policy, 1))).toHaveLength(5);
    });

    it("never reserves more tokens in a day than the budget, whatever the concurrency", async () => {
      const policy = { tokensPerDay: 150_000 };
      const admissions = await admitMany([limiter], 20, key, policy, 10_000);

      const reserved = reservationsOf(admissions).reduce((sum, reservation) => sum + reservation.tokens, 0);
      expect(reserved).toBe(150_000);
      for (const refusal of refusalsOf(admissions)) {
        expect(refusal.limit).toBe("tokens_per_day");
        expect(Math.abs(refusal.retryAfterSeconds - secondsUntilUtcMidnight(backend.now()))).toBeLessThanOrEqual(2);
      }
      expect((await limiter.peek(key, policy)).tokens).toMatchObject({ limit: 150_000, remaining: 0 });
    });

    it("gives back the difference when a request settles for less than it reserved", async () => {
      const policy = { tokensPerDay: 30_000 };
      const [first] = reservationsOf(await admitMany([limiter], 3, key, policy, 10_000));
      expect((await limiter.admit(key, policy, 10_000)).allowed).toBe(false);

      await limiter.settle(first!, 2_000);

      expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(8_000);
      expect((await limiter.admit(key, policy, 8_000)).allowed).toBe(true);
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);
    });

    it("settles an aborted request at what it used; settling again, or an unknown reservation, changes nothing", async () => {
      const policy = { tokensPerDay: 100_000 };
      const reservation = admitted(await limiter.admit(key, policy, 40_000));
      expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(60_000);

      await limiter.settle(reservation, 1_234);
      await limiter.settle(reservation, 0);
      await limiter.settle({ ...reservation, id: randomUUID() }, 0);
      expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(100_000 - 1_234);
    });

    it("charges what was used when it is more than the reservation (an upstream's prompt over its estimate), and refuses the next request", async () => {
      const policy = { tokensPerDay: 10_000 };
      const estimated = admitted(await limiter.admit(key, policy, 4_000));
      await limiter.settle(estimated, 7_000);
      expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(3_000);
      // Past the budget by what the estimate missed: nothing more is admitted today.
      const another = admitted(await limiter.admit(key, policy, 3_000));
      await limiter.settle(another, 3_500);
      expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(0);
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);
    });

    it("holds a concurrency slot from admit to settle", async () => {
      const policy = { concurrentRequests: 3 };
      const admissions = await admitMany([limiter], 10, key, policy, 1);
      const reservations = reservationsOf(admissions);
      expect(reservations).toHaveLength(3);
      for (const refusal of refusalsOf(admissions)) {
        expect(refusal).toMatchObject({ limit: "concurrent_requests", retryAfterSeconds: 1 });
      }

      await limiter.settle(reservations[0]!, 1);
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(true);
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);
    });

    it("frees the slot of a reservation never settled (its holder crashed) once it expires", async () => {
      const policy = { concurrentRequests: 1 };
      admitted(await limiter.admit(key, policy, 1));
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(false);

      await backend.advance(backend.reservationTtlMs + 50);
      expect((await limiter.admit(key, policy, 1)).allowed).toBe(true);
    });

    it("counts requests per day, settled or not, until midnight UTC", async () => {
      const policy = { requestsPerDay: 5 };
      for (let i = 0; i < 5; i++) await limiter.settle(admitted(await limiter.admit(key, policy, 1)), 1);

      const refused = await limiter.admit(key, policy, 1);
      expect(refused).toMatchObject({ allowed: false, limit: "requests_per_day" });
      if (refused.allowed) return;
      expect(Math.abs(refused.retryAfterSeconds - secondsUntilUtcMidnight(backend.now()))).toBeLessThanOrEqual(2);
    });

    it("reports the refusal that lasts longest when several limits refuse", async () => {
      const policy = { requestsPerMinute: 1, tokensPerDay: 10, concurrentRequests: 1 };
      admitted(await limiter.admit(key, policy, 10));

      expect(await limiter.admit(key, policy, 1)).toMatchObject({ allowed: false, limit: "tokens_per_day" });
    });

    it("peeks without consuming anything", async () => {
      const policy = { requestsPerMinute: 2, tokensPerDay: 1_000 };
      expect(await limiter.peek(key, policy)).toMatchObject({
        requests: { limit: 2, remaining: 2, resetSeconds: 0 },
        tokens: { limit: 1_000, remaining: 1_000 },
      });
      await limiter.peek(key, policy);

      const admission = await limiter.admit(key, policy, 100);
      expect(admission.state).toMatchObject({ requests: { remaining: 1 }, tokens: { remaining: 900 } });
      expect(await limiter.peek(key, policy)).toMatchObject({ requests: { remaining: 1 }, tokens: { remaining: 900 } });
      expect((await limiter.admit(key, policy, 100)).allowed).toBe(true);
    });

    it("omits unlimited dimensions from the state", async () => {
      expect(await limiter.admit(key, {}, 10)).toMatchObject({ allowed: true, state: {} });
      expect(await limiter.peek(key, { requestsPerDay: 10, concurrentRequests: 2 })).toEqual({});
    });

    it("stays exact across two clients of the same counters", async () => {
      const second = await backend.open();
      const admissions = await admitMany([limiter, second], 100, key, { requestsPerMinute: 15 }, 1);

      expect(reservationsOf(admissions)).toHaveLength(15);
      expect(refusalsOf(admissions)).toHaveLength(85);
    });

    describe("reservations of a holder that died", () => {
      const policy = { tokensPerDay: 10_000, concurrentRequests: 2, requestsPerDay: 4 };

      it("are released once its lease has run out: charged their prompts, slots freed, request units still counted", async () => {
        const dead = await backend.open();
        const first = admitted(await dead.admit(key, policy, 4_000, 100));
        admitted(await dead.admit(key, policy, 4_000, 300));
        expect(await limiter.admit(key, policy, 1)).toMatchObject({ allowed: false, limit: "concurrent_requests" });
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(2_000);

        await backend.advance(backend.leaseMs + 100);
        await limiter.heartbeat();
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(10_000 - 400);
        // Both slots are free again; the two requests that started still count for the day.
        admitted(await limiter.admit(key, policy, 1));
        admitted(await limiter.admit(key, policy, 1));
        expect(await limiter.admit(key, policy, 1)).toMatchObject({ allowed: false, limit: "requests_per_day" });

        // Should the holder come back and settle after all, nothing is given back twice.
        await dead.settle(first, 0);
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(10_000 - 400 - 2);
      });

      it("stay held while their holder's heartbeats renew its lease", async () => {
        const live = await backend.open();
        const reservation = admitted(await live.admit(key, policy, 4_000, 100));
        admitted(await live.admit(key, policy, 4_000, 100));
        await backend.advance(backend.leaseMs * 0.6);
        await live.heartbeat();
        await backend.advance(backend.leaseMs * 0.6);

        await limiter.heartbeat();
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(2_000);
        expect(await limiter.admit(key, policy, 1)).toMatchObject({ allowed: false, limit: "concurrent_requests" });
        await live.settle(reservation, 1_000);
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(5_000);
      });

      it("are released at once when the same instance restarts, and by no other instance", async () => {
        await limiter.claimInstance("host-a http://127.0.0.1:8080");
        admitted(await limiter.admit(key, policy, 4_000, 100));

        const other = await backend.open();
        await other.claimInstance("host-a http://127.0.0.1:8081");
        expect((await other.peek(key, policy)).tokens?.remaining).toBe(6_000);

        // The crashed instance's lease has not run out, but it no longer listens where it did.
        const restarted = await backend.open();
        await restarted.claimInstance("host-a http://127.0.0.1:8080");
        expect((await restarted.peek(key, policy)).tokens?.remaining).toBe(9_900);
        expect((await restarted.admit(key, policy, 1)).allowed).toBe(true);
      });

      it("are released by the next heartbeat of another holder once their holder has closed", async () => {
        const closing = await backend.open();
        admitted(await closing.admit(key, policy, 4_000, 250));
        await closing.close();

        await limiter.heartbeat();
        expect((await limiter.peek(key, policy)).tokens?.remaining).toBe(9_750);
      });
    });

    it("refuses a prompt larger than its reservation as the caller's bug, not as unavailability", async () => {
      await expect(limiter.admit(key, {}, 10, 11)).rejects.toBeInstanceOf(RangeError);
      await expect(limiter.admit(key, {}, -1)).rejects.toBeInstanceOf(RangeError);
    });
  });
}
