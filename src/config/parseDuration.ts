const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses durations as Ollama's keep_alive does: "5m", "30s", "1h30m", "250ms", a bare number of
 * seconds, or a negative value / "forever" for "never expires" (returned as Infinity).
 * Returns undefined when the text is not a duration.
 */
export function parseDuration(text: string): number | undefined {
  const value = text.trim().toLowerCase();
  if (value === "forever" || value === "never") return Infinity;
  if (/^-?\d+(\.\d+)?$/.test(value)) {
    const seconds = Number(value);
    return seconds < 0 ? Infinity : seconds * 1000;
  }
  if (value.startsWith("-")) return parseDuration(value.slice(1)) === undefined ? undefined : Infinity;
  const parts = value.match(/\d+(?:\.\d+)?(?:ms|s|m|h|d)/g);
  if (!parts || parts.join("") !== value) return undefined;
  let total = 0;
  for (const part of parts) {
    const [, amount, unit] = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part) ?? [];
    total += Number(amount) * (units[unit ?? ""] ?? NaN);
  }
  return Number.isFinite(total) ? total : undefined;
}
