import { readFile } from "node:fs/promises";
import { z } from "zod";
import { AccessError } from "./AccessError.js";
import type { LimitPolicy } from "./RateLimiter.js";

const positive = z.int().min(1);

const limitsSchema = z.strictObject({
  requestsPerMinute: positive.optional(),
  requestsPerDay: positive.optional(),
  tokensPerDay: positive.optional(),
  concurrentRequests: positive.optional(),
  /** Largest prompt a request may send; more is a 413. */
  maxInputTokens: positive.optional(),
  /** Cap on a request's output; max_tokens above it is lowered to it. */
  maxOutputTokens: positive.optional(),
});

const tierSchema = limitsSchema.extend({
  /**
   * Limits of their own for some models: keys are model-name globs (`text-embedding-*`) or the
   * groups `@chat`, `@embeddings`, `@rerank` and `@tokenize` (by endpoint). Unset fields come from the tier; the group has
   * counters of its own.
   */
  models: z.record(z.string().min(1), limitsSchema).default({}),
});

const tiersFileSchema = z.strictObject({
  /** The tier of accounts created without one. */
  default: z.string().min(1).default("free"),
  tiers: z.record(z.string().min(1), tierSchema),
});

export type TierLimits = z.infer<typeof limitsSchema>;
export type TiersConfig = z.infer<typeof tiersFileSchema>;

/** Built in: the free tier of the hosted profile. A tiers file replaces it. */
export const defaultTiers: TiersConfig = {
  default: "free",
  tiers: { free: { requestsPerMinute: 15, tokensPerDay: 150_000, models: {} } },
};

/** The tiers in `file` (JSON), or the built-in ones without a file. A file that cannot be read or is not valid is an AccessError `tiers_file_invalid` naming what is wrong. */
export async function loadTiers(file: string | undefined): Promise<TiersConfig> {
  if (!file) return defaultTiers;
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new AccessError("tiers_file_invalid", `Cannot read the tiers file ${file}: ${(error as Error).message}`, { cause: error });
  }
  const parsed = tiersFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AccessError("tiers_file_invalid", `Invalid tiers file ${file}: ${issue?.path.join(".") || "(root)"}: ${issue?.message}`);
  }
  if (!parsed.data.tiers[parsed.data.default]) {
    throw new AccessError("tiers_file_invalid", `Invalid tiers file ${file}: default tier "${parsed.data.default}" is not defined.`);
  }
  return parsed.data;
}

/** What a request is for: its group in a tier's `models` (`@chat`, `@embeddings`, `@rerank`, `@tokenize`). */
export type Endpoint = "chat" | "embeddings" | "rerank" | "tokenize";

/** The limits one request is held to, and the counters (key) it counts against. */
export interface ResolvedLimits {
  key: string;
  policy: LimitPolicy;
  maxInputTokens?: number;
  maxOutputTokens?: number;
}

/** What a request asks for: an endpoint, and the model, which model-name globs are matched against (without one, only the endpoint's group applies). */
export interface LimitTarget {
  endpoint: Endpoint;
  model?: string;
}

/**
 * The limits for an account's request: the tier's, or the first matching override's (tier values
 * filling what it leaves unset), counted separately per override.
 */
export function resolveLimits(tiers: TiersConfig, accountId: string, tierName: string, target: LimitTarget): ResolvedLimits {
  const tier = tiers.tiers[tierName] ?? tiers.tiers[tiers.default];
  if (!tier) return { key: accountId, policy: {} };
  const { models, ...base } = tier;
  const { endpoint, model } = target;
  const matches = ([pattern]: [string, TierLimits]) =>
    pattern.startsWith("@") ? pattern === `@${endpoint}` : model !== undefined && globMatches(pattern, model);
  const match = Object.entries(models).find(matches);
  const limits: TierLimits = match ? { ...base, ...match[1] } : base;
  const { maxInputTokens, maxOutputTokens, ...policy } = limits;
  return { key: match ? `${accountId}:${match[0]}` : accountId, policy, maxInputTokens, maxOutputTokens };
}

function globMatches(pattern: string, name: string): boolean {
  const regex = new RegExp(
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );
  return regex.test(name);
}
