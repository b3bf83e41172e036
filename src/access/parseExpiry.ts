const DAY_MS = 86_400_000;

/**
 * A token's expiry as the CLI takes it: `7d`, `30d`, `60d`, `90d` from now, an ISO date
 * (`YYYY-MM-DD`, expiring at the end of that UTC day), or `never`. Returns ms since the epoch,
 * null for never, or undefined when the text is none of these.
 */
export function parseExpiry(text: string, now: number): number | null | undefined {
  const value = text.trim().toLowerCase();
  if (value === "never") return null;
  const days = /^(7|30|60|90)d$/.exec(value);
  if (days) return now + Number(days[1]) * DAY_MS;
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) {
    const end = Date.parse(`${value}T23:59:59.999Z`);
    if (Number.isNaN(end) || new Date(end).toISOString().slice(0, 10) !== value) return undefined;
    return end > now ? end : undefined;
  }
  return undefined;
}
