import { ServerError } from "../../core/ServerError.js";

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;

/**
 * `keep_alive` in milliseconds: a number is seconds, a string is a Go duration ("5m", "1h30m",
 * "-1m"); negative means forever (Infinity), 0 unloads once the reply is done. A bare number in a
 * string ("300") has no unit, which the reference server refuses too. Undefined: the server's default.
 */
export function parseKeepAlive(value: number | string | null | undefined): number | undefined {
  if (value == null) return undefined;
  const ms = typeof value === "number" ? value * 1000 : parseGoDuration(value);
  if (ms === undefined || !Number.isFinite(ms)) {
    throw new ServerError("invalid_request", {
      param: "keep_alive",
      message: `Invalid value for 'keep_alive': ${JSON.stringify(value)} is not a duration; send seconds as a number (negative: forever), or a duration string such as "5m" or "1h".`,
    });
  }
  return ms < 0 ? Infinity : ms;
}

function parseGoDuration(text: string): number | undefined {
  const negative = text.startsWith("-");
  const body = text.replace(/^[-+]/, "");
  if (body === "0") return 0;
  if (body === "") return undefined;
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < body.length) {
    const start = PART.lastIndex;
    const match = PART.exec(body);
    if (!match || match.index !== start) return undefined;
    total += Number(match[1]) * (UNIT_MS[match[2] as string] as number);
  }
  return negative ? -total : total;
}
