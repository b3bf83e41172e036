import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EndpointPool, type Endpoint, type EndpointSpec } from "../../src/upstream/EndpointPool.js";
import { readUpstreams, UpstreamConfigError } from "../../src/upstream/upstreamConfig.js";

const spec = (url: string, weight = 1, maxConcurrent = 1000): EndpointSpec => ({ url, weight, maxConcurrent });
const urlOf = (endpoint: Endpoint | undefined) => endpoint?.spec.url;

describe("EndpointPool: which upstream endpoint serves a request (issue 34)", () => {
  it("sends a conversation to the same endpoint every turn, and spreads conversations by weight", () => {
    const pool = new EndpointPool([spec("a"), spec("b", 2), spec("c")]);
    const counts = new Map<string, number>();
    for (let i = 0; i < 4000; i++) {
      const first = pool.pick(`conversation ${i}`)!;
      pool.end(first.endpoint, true);
      expect(first.preferred).toBe(true);
      // Its next turn, the pool idle again: the same endpoint.
      const again = pool.pick(`conversation ${i}`)!;
      pool.end(again.endpoint, true);
      expect(urlOf(again.endpoint)).toBe(urlOf(first.endpoint));
      counts.set(urlOf(first.endpoint)!, (counts.get(urlOf(first.endpoint)!) ?? 0) + 1);
    }
    // 1 : 2 : 1 of 4,000, within 15%.
    expect(counts.get("a")! / 1000).toBeGreaterThan(0.85);
    expect(counts.get("a")! / 1000).toBeLessThan(1.15);
    expect(counts.get("b")! / 2000).toBeGreaterThan(0.85);
    expect(counts.get("b")! / 2000).toBeLessThan(1.15);
  });

  it("moves only the conversations of an endpoint that goes down (consistent hashing)", () => {
    const pool = new EndpointPool([spec("a"), spec("b"), spec("c"), spec("d")]);
    const before = new Map<string, string>();
    for (let i = 0; i < 1000; i++) {
      const pick = pool.pick(`k${i}`)!;
      pool.end(pick.endpoint, true);
      before.set(`k${i}`, urlOf(pick.endpoint)!);
    }
    pool.markDown(pool.endpoints[1]!);
    for (const [key, url] of before) {
      const pick = pool.pick(key)!;
      pool.end(pick.endpoint, true);
      if (url !== "b") expect(urlOf(pick.endpoint)).toBe(url);
      else expect(urlOf(pick.endpoint)).not.toBe("b");
    }
  });

  it("never lets an endpoint go past its bounded share when conversations pile onto it", () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { minLength: 1, maxLength: 200 }), fc.integer({ min: 2, max: 6 }), (keys, size) => {
        const pool = new EndpointPool(Array.from({ length: size }, (_, i) => spec(`e${i}`)));
        for (const [n, key] of keys.entries()) {
          pool.pick(key);
          // 1.25 × the mean of what is in flight, rounded up, checked as each request is added.
          const bound = Math.ceil((1.25 * (n + 1)) / size);
          for (const endpoint of pool.endpoints) expect(endpoint.inFlight).toBeLessThanOrEqual(bound);
        }
      }),
    );
  });

  it("sends requests without a conversation to the least loaded endpoint for its weight, and respects each cap", () => {
    const pool = new EndpointPool([spec("a", 1, 2), spec("b", 3, 100)]);
    const picks = Array.from({ length: 8 }, () => urlOf(pool.pick()?.endpoint));
    // b takes 3 of every 4 until a's cap of 2 would matter.
    expect(picks.filter((url) => url === "a")).toHaveLength(2);
    expect(picks.filter((url) => url === "b")).toHaveLength(6);
    const capped = new EndpointPool([spec("a", 1, 1)]);
    expect(capped.pick()).toBeDefined();
    expect(capped.pick()).toBeUndefined();
  });

  it("takes an endpoint out after 3 failures in a row, tries it again after its time out, and doubles it on another failure", () => {
    let now = 0;
    const pool = new EndpointPool([spec("a"), spec("b")], { ejectMs: 1000, now: () => now });
    const [a] = pool.endpoints as [Endpoint, Endpoint];
    for (let i = 0; i < 3; i++) {
      const pick = pool.pick(undefined, new Set(pool.endpoints.filter((endpoint) => endpoint !== a)))!;
      pool.end(pick.endpoint, false);
    }
    expect(a.down).toBe(true);
    expect(Array.from({ length: 5 }, () => urlOf(pool.pick()?.endpoint)).every((url) => url === "b")).toBe(true);
    now = 1000;
    const retry = pool.pick(undefined, new Set([pool.endpoints[1]!]))!;
    expect(urlOf(retry.endpoint)).toBe("a");
    // The retry fails: out at once, for twice as long.
    pool.end(retry.endpoint, false);
    expect(a.down).toBe(true);
    now = 2999;
    expect(pool.pick(undefined, new Set([pool.endpoints[1]!]))).toBeUndefined();
    now = 3000;
    const second = pool.pick(undefined, new Set([pool.endpoints[1]!]))!;
    pool.end(second.endpoint, true);
    expect(a.down).toBe(false);
  });
  describe("round-robin (routing: round-robin)", () => {
    it("takes the endpoints in turn whatever the conversation, interleaved by weight, with no affinity hit or miss", () => {
      const pool = new EndpointPool([spec("a"), spec("b")], { routing: "round-robin" });
      const picks = Array.from({ length: 6 }, () => pool.pick("one conversation")!);
      for (const pick of picks) pool.end(pick.endpoint, true);
      expect(picks.map((pick) => urlOf(pick.endpoint))).toEqual(["a", "b", "a", "b", "a", "b"]);
      expect(picks.every((pick) => pick.preferred === undefined)).toBe(true);
      // Weights 2 and 1: a, b, a in every three (smooth weighted round-robin), not a, a, b.
      const weighted = new EndpointPool([spec("a", 2), spec("b")], { routing: "round-robin" });
      const order = Array.from({ length: 9 }, () => {
        const pick = weighted.pick()!;
        weighted.end(pick.endpoint, true);
        return urlOf(pick.endpoint);
      });
      expect(order).toEqual(["a", "b", "a", "a", "b", "a", "a", "b", "a"]);
    });

    it("skips endpoints that are down, at their cap or already tried, and gives none when all are", () => {
      const pool = new EndpointPool([spec("a", 1, 1), spec("b", 1, 100), spec("c", 1, 100)], { routing: "round-robin" });
      const [a, b, c] = pool.endpoints as [Endpoint, Endpoint, Endpoint];
      // a takes one request and is then at its cap: the others alternate.
      const held = pool.pick()!;
      expect(held.endpoint).toBe(a);
      const next = Array.from({ length: 4 }, () => urlOf(pool.pick()?.endpoint));
      expect(next).toEqual(["b", "c", "b", "c"]);
      pool.markDown(b);
      expect(Array.from({ length: 3 }, () => urlOf(pool.pick()?.endpoint))).toEqual(["c", "c", "c"]);
      expect(pool.pick(undefined, new Set([c]))).toBeUndefined();
      // Back up, b is not owed the turns it missed: the two alternate again.
      pool.markUp(b);
      pool.end(held.endpoint, true);
      const after = Array.from({ length: 6 }, () => {
        const pick = pool.pick()!;
        pool.end(pick.endpoint, true);
        return urlOf(pick.endpoint);
      });
      for (const url of ["a", "b", "c"]) expect(after.filter((each) => each === url)).toHaveLength(2);
    });
  });
  it("reads a model's routing from the upstreams file (absent: affinity), and refuses an unknown one", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-upstreams-"));
    try {
      const file = path.join(dir, "upstreams.json");
      const endpoints = [{ url: "http://127.0.0.1:9/v1" }];
      await writeFile(file, JSON.stringify({ models: { a: { endpoints }, b: { endpoints, routing: "round-robin" } } }));
      const models = await readUpstreams(file);
      expect(models.get("a")!.routing).toBeUndefined();
      expect(models.get("b")!.routing).toBe("round-robin");
      await writeFile(file, JSON.stringify({ models: { a: { endpoints, routing: "random" } } }));
      await expect(readUpstreams(file)).rejects.toThrow(UpstreamConfigError);
      await expect(readUpstreams(file)).rejects.toThrow(/models\.a\.routing/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("an endpoint failed requests took out, and health checks", () => {
  it("stays out until its own retry, whatever a passing check says, and a check's hold ends with a passing check", () => {
    let now = 0;
    const pool = new EndpointPool(
      [
        { url: "http://a/v1", weight: 1, maxConcurrent: 4 },
        { url: "http://b/v1", weight: 1, maxConcurrent: 4 },
      ],
      { now: () => now },
    );
    const [a] = pool.endpoints;
    for (let i = 0; i < 3; i++) {
      const pick = pool.pick(undefined, new Set([pool.endpoints[1]!]))!;
      pool.end(pick.endpoint, false);
    }
    expect(a!.down).toBe(true);
    // Its GET /models answers: the chat requests it failed say more.
    pool.markUp(a!);
    expect(a!.down).toBe(true);
    now += 5_001;
    expect(pool.pick(undefined, new Set([pool.endpoints[1]!]))?.endpoint).toBe(a);
    // A failed check holds it out past its retry time, until a check passes.
    pool.end(a!, true);
    pool.markDown(a!);
    now += 60_000;
    expect(pool.pick(undefined, new Set([pool.endpoints[1]!]))).toBeUndefined();
    pool.markUp(a!);
    expect(pool.pick(undefined, new Set([pool.endpoints[1]!]))?.endpoint).toBe(a);
  });
});
