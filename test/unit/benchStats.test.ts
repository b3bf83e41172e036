import { describe, expect, it } from "vitest";
import { goodput, interTokenLatency, mean, median, percentile, poissonArrivals, seededRandom } from "../../bench/stats.js";
import { saturationRate } from "../../bench/load.js";

describe("bench statistics", () => {
  it("takes percentiles by rank, whatever the order", () => {
    const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentile(values, 50)).toBe(6);
    expect(percentile(values, 90)).toBe(10);
    expect(percentile(values, 99)).toBe(10);
    expect(percentile(values, 0)).toBe(1);
    expect(median(values)).toBe(5.5);
    expect(mean(values)).toBe(5.5);
    expect(mean([1, 1, 10])).toBe(4);
    expect(percentile([], 50)).toBeNaN();
    expect(mean([])).toBeNaN();
  });

  it("draws the same Poisson arrivals from the same seed, and others from another", () => {
    const a = poissonArrivals(2, 50, 7);
    expect(poissonArrivals(2, 50, 7)).toEqual(a);
    expect(poissonArrivals(2, 50, 8)).not.toEqual(a);
    expect(a).toHaveLength(50);
    for (let i = 1; i < a.length; i++) expect(a[i]!).toBeGreaterThan(a[i - 1]!);
    expect(() => poissonArrivals(0, 5, 1)).toThrow();
  });

  it("spaces Poisson arrivals by 1/rate on average", () => {
    const times = poissonArrivals(4, 20_000, 32);
    const meanGapMs = times[times.length - 1]! / times.length;
    expect(meanGapMs).toBeGreaterThan(240);
    expect(meanGapMs).toBeLessThan(260);
  });

  it("makes uniform numbers in [0, 1)", () => {
    const random = seededRandom(1);
    const values = Array.from({ length: 10_000 }, random);
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...values)).toBeLessThan(1);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    expect(mean).toBeGreaterThan(0.48);
    expect(mean).toBeLessThan(0.52);
  });

  it("counts goodput as requests meeting both targets per second of the run", () => {
    const samples = [
      { ttftMs: 100, tokens: 11, decodeMs: 200 }, // ITL 20: good
      { ttftMs: 900, tokens: 11, decodeMs: 200 }, // TTFT missed
      { ttftMs: 100, tokens: 11, decodeMs: 500 }, // ITL 50 missed
      { ttftMs: 500, tokens: 1, decodeMs: 0 }, // one token, no ITL to miss: good
    ];
    expect(interTokenLatency(samples[0]!)).toBe(20);
    expect(interTokenLatency(samples[3]!)).toBeNaN();
    expect(goodput(samples, { ttftMs: 500, itlMs: 30 }, 4000)).toEqual({ good: 2, perSecond: 0.5 });
  });

  it("estimates saturation from the prefill and aggregate decode rates", () => {
    // 500 prompt tokens at 1,000/s and 100 tokens at 100/s: 1.5 s a request.
    expect(saturationRate(500, 100, 1000, 100)).toBeCloseTo(1 / 1.5, 10);
  });
});
