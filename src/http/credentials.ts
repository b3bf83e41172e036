import { timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { ServerError } from "../core/ServerError.js";

/**
 * The caller's credential, as an Authorization value: the `Authorization` header, or the
 * `x-api-key` header that Anthropic's clients send (taken as `Bearer <key>`). Refused when a
 * header is sent more than once (Node keeps only the first of duplicates, and a proxy may read the
 * last, so two headers could authenticate as two different callers: the raw header list still has
 * every copy), and when both headers are sent with different tokens.
 */
export function singleCredential(request: FastifyRequest): string | undefined {
  const raw = request.raw.rawHeaders;
  const counts = { authorization: 0, "x-api-key": 0 };
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]?.toLowerCase();
    if (name === "authorization" || name === "x-api-key") counts[name]++;
  }
  if (counts.authorization > 1 || counts["x-api-key"] > 1) {
    throw new ServerError("invalid_api_key", {
      message: `The request has more than one ${counts.authorization > 1 ? "Authorization" : "x-api-key"} header, which is ambiguous. Send exactly one credential.`,
    });
  }
  const { authorization } = request.headers;
  const apiKey = request.headers["x-api-key"];
  if (typeof apiKey !== "string") return authorization;
  const fromKey = `Bearer ${apiKey.trim()}`;
  // The same token in both (clients that set both from one variable) is one credential.
  if (authorization !== undefined && bearerToken(authorization) !== apiKey.trim()) {
    throw new ServerError("invalid_api_key", {
      message:
        "The request has both an Authorization and an x-api-key header with different credentials, which is ambiguous. Send exactly one.",
    });
  }
  return fromKey;
}

export function bearerToken(authorization: string): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
}

/** Constant-time comparison of two secrets (their lengths may differ: a length is no secret). */
export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
