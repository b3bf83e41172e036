import type { z } from "zod";
import { ServerError } from "../core/ServerError.js";

type Issue = z.core.$ZodIssue;
type PathKey = PropertyKey;

/** `["messages", 2, "content"]` → `messages[2].content`, the form OpenAI uses in `error.param`. */
export function formatParam(path: readonly PathKey[]): string {
  return path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join("");
}

/**
 * Turns the first schema violation into a 400 that names the offending parameter and says what was
 * expected, e.g. "Invalid type for 'messages[0].content': expected a string, got a number."
 */
export function toInvalidRequestError(error: z.ZodError, body: unknown): ServerError {
  const first = error.issues[0];
  if (!first) return new ServerError("invalid_request");
  const { issue, path } = mostSpecific(first, first.path);
  const param = formatParam(path);
  const value = valueAt(body, path);
  let message: string;
  if (value === undefined && issue.code === "invalid_type") {
    message = `Missing required parameter: '${param}'.`;
  } else if (issue.code === "invalid_type") {
    message = `Invalid type for '${param}': expected ${issue.expected}, got ${describeType(value)}.`;
  } else {
    message = `Invalid value for '${param}': ${lowerFirst(issue.message)}.`;
  }
  return new ServerError("invalid_request", { param, message });
}

/**
 * For a union, zod reports "Invalid input" at the union itself; the branch that got furthest
 * (deepest path, or a range error rather than a type mismatch) says what the caller meant.
 */
function mostSpecific(issue: Issue, path: readonly PathKey[]): { issue: Issue; path: readonly PathKey[] } {
  if (issue.code !== "invalid_union" || issue.errors.length === 0 || "note" in issue) return { issue, path };
  let best: { issue: Issue; score: number } | undefined;
  for (const branch of issue.errors) {
    const candidate = branch[0];
    if (!candidate) continue;
    const score = candidate.path.length * 2 + (candidate.code === "invalid_type" ? 0 : 1);
    if (!best || score > best.score) best = { issue: candidate, score };
  }
  // Every branch refused the value's type: the union's own message says what was expected.
  if (!best || best.score === 0) return { issue, path };
  return mostSpecific(best.issue, [...path, ...best.issue.path]);
}

function valueAt(body: unknown, path: readonly PathKey[]): unknown {
  let current = body;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "object":
      return "an object";
    case "string":
      return "a string";
    case "number":
      return Number.isInteger(value) ? "an integer" : "a number";
    case "boolean":
      return "a boolean";
    default:
      return typeof value;
  }
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
