import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { AccessError } from "../../src/access/AccessError.js";
import { defaultTiers, loadTiers, resolveLimits } from "../../src/access/tiers.js";
import { parseExpiry } from "../../src/access/parseExpiry.js";
import { formatResetDuration } from "../../src/http/rateLimitHeaders.js";

const tiers = {
  default: "free",
  tiers: {
    free: {
      requestsPerMinute: 15,
      tokensPerDay: 150_000,
      maxOutputTokens: 512,
      models: { "@embeddings": { requestsPerMinute: 60 }, "big-*": { tokensPerDay: 10_000 } },
    },
  },
};

describe("tiers", () => {
  it("has the free tier by default: 15 requests per minute, 150,000 tokens per day", () => {
    expect(resolveLimits(defaultTiers, "acct_1", "free", { endpoint: "chat", model: "m" })).toEqual({
      key: "acct_1",
      policy: { requestsPerMinute: 15, tokensPerDay: 150_000 },
      maxInputTokens: undefined,
      maxOutputTokens: undefined,
    });
  });

  it("applies per-model and per-endpoint overrides with counters of their own, inheriting the rest", () => {
    expect(resolveLimits(tiers as never, "a", "free", { endpoint: "embeddings", model: "text-embed" })).toMatchObject({
      key: "a:@embeddings",
      policy: { requestsPerMinute: 60, tokensPerDay: 150_000 },
      maxOutputTokens: 512,
    });
    expect(resolveLimits(tiers as never, "a", "free", { endpoint: "chat", model: "big-model" })).toMatchObject({
      key: "a:big-*",
      policy: { requestsPerMinute: 15, tokensPerDay: 10_000 },
    });
    expect(resolveLimits(tiers as never, "a", "free", { endpoint: "chat", model: "small" })).toMatchObject({
      key: "a",
      policy: { requestsPerMinute: 15 },
    });
    // No model: no glob applies, even one that matches every name; the endpoint's group still does.
    const everyModel = { default: "free", tiers: { free: { requestsPerMinute: 15, models: { "*": { requestsPerMinute: 1 } } } } };
    expect(resolveLimits(everyModel as never, "a", "free", { endpoint: "chat" })).toMatchObject({
      key: "a",
      policy: { requestsPerMinute: 15 },
    });
    expect(resolveLimits(tiers as never, "a", "free", { endpoint: "embeddings" })).toMatchObject({ key: "a:@embeddings" });
  });

  it("refuses a tiers file with a clear message", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tiers-"));
    const write = async (content: unknown) => {
      const file = path.join(dir, `${Math.random()}.json`);
      await writeFile(file, typeof content === "string" ? content : JSON.stringify(content));
      return file;
    };
    await expect(loadTiers(await write("{"))).rejects.toThrow(/Cannot read the tiers file/);
    await expect(loadTiers(path.join(dir, "missing.json"))).rejects.toMatchObject({ name: "AccessError", code: "tiers_file_invalid" });
    await expect(loadTiers(await write({ tiers: { free: { requestsPerMinute: -1 } } }))).rejects.toThrow(/tiers\.free\.requestsPerMinute/);
    await expect(loadTiers(await write({ tiers: { free: { rpm: 5 } } }))).rejects.toThrow(/Invalid tiers file/);
    await expect(loadTiers(await write({ default: "gold", tiers: { free: {} } }))).rejects.toThrow(/default tier "gold"/);
    await expect(loadTiers(await write({ tiers: { free: { rpm: 5 } } }))).rejects.toBeInstanceOf(AccessError);
    expect((await loadTiers(await write(tiers))).tiers.free?.models["@embeddings"]).toEqual({ requestsPerMinute: 60 });
  });
});

describe("token expiry and reset durations", () => {
  const now = Date.parse("2026-01-10T12:00:00Z");
  it.each([
    ["7d", now + 7 * 86_400_000],
    ["90d", now + 90 * 86_400_000],
    ["never", null],
    ["2026-02-01", Date.parse("2026-02-01T23:59:59.999Z")],
  ])("%s", (text, expected) => expect(parseExpiry(text, now)).toBe(expected));
  it.each(["3d", "2025-01-01", "2026-02-30", "soon"])("refuses %s", (text) => expect(parseExpiry(text, now)).toBeUndefined());
  it("formats resets as OpenAI does", () => {
    expect(formatResetDuration(0.2)).toBe("1s");
    expect(formatResetDuration(59)).toBe("59s");
    expect(formatResetDuration(360)).toBe("6m0s");
    expect(formatResetDuration(3723)).toBe("1h2m3s");
  });
});
