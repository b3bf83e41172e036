import pino, { type DestinationStream, type Logger } from "pino";

export type LogFormat = "auto" | "pretty" | "json";

export interface LoggerOptions {
  /** auto: pretty on a terminal, JSON otherwise (a pipe, a file, a log collector, a given destination). */
  format?: LogFormat;
  /** Where lines go instead of stdout (tests). */
  destination?: DestinationStream;
}

/**
 * Logs on stdout (or the given stream): JSON lines, or one short line per event for a person at a
 * terminal. Credentials never reach either: redaction happens before a line is formatted.
 */
export function createLogger(level: string, { format = "auto", destination }: LoggerOptions = {}): Logger {
  const options = {
    level,
    redact: {
      paths: ["req.headers.authorization", "req.headers.cookie", 'req.headers["x-api-key"]', "authorization", "token", "secret"],
      censor: "[redacted]",
    },
    serializers: {
      // Fastify logs "request completed" with the reply: its method and URL make that line complete
      // on its own, so a reader (or the pretty format, which drops "incoming request") needs no other.
      res: (reply: { statusCode: number; request?: { method: string; url: string } }) => ({
        statusCode: reply.statusCode,
        ...(reply.request ? { method: reply.request.method, url: reply.request.url } : {}),
      }),
    },
  };
  const pretty = format === "pretty" || (format === "auto" && destination === undefined && process.stdout.isTTY === true);
  if (pretty) {
    const color = destination === undefined && process.stdout.isTTY === true;
    const out = destination ?? process.stdout;
    return pino(options, {
      write(line: string) {
        const text = formatLine(line, color);
        if (text) out.write(text);
      },
    });
  }
  return destination ? pino(options, destination) : pino(options);
}

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: "TRACE", color: "90" },
  20: { name: "DEBUG", color: "36" },
  30: { name: "INFO", color: "32" },
  40: { name: "WARN", color: "33" },
  50: { name: "ERROR", color: "31" },
  60: { name: "FATAL", color: "41" },
};
/** Fields every line has or that say nothing to a person reading a terminal. */
const OMITTED = new Set(["level", "time", "msg", "pid", "hostname", "reqId", "req", "res", "responseTime", "err"]);

/**
 * One pino JSON line as a short line: `12:03:04 GET /v1/models 200 4 ms` for a finished request,
 * `12:03:04 WARN message key=value …` for anything else; "" (nothing) for "incoming request", which
 * the finished request's line repeats, and for Fastify's "Server listening at", which
 * "modelhost listening" repeats.
 */
function formatLine(json: string, color: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  if (entry.msg === "incoming request" || String(entry.msg).startsWith("Server listening at")) return "";
  const paint = (code: string, text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
  const time = paint("90", new Date(Number(entry.time)).toTimeString().slice(0, 8));
  const level = LEVELS[Number(entry.level)] ?? { name: String(entry.level), color: "0" };
  const res = entry.res as { statusCode?: number; method?: string; url?: string } | undefined;
  const err = entry.err as { message?: string } | undefined;
  const extra = Object.entries(entry)
    .filter(([key]) => !OMITTED.has(key))
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
  if (err?.message) extra.push(`error=${JSON.stringify(err.message)}`);
  const tail = extra.length > 0 ? ` ${paint("90", extra.join(" "))}` : "";
  if (res?.method && typeof entry.responseTime === "number") {
    const status = res.statusCode ?? 0;
    const statusColor = status >= 500 ? "31" : status >= 400 ? "33" : "32";
    return `${time} ${res.method} ${res.url} ${paint(statusColor, String(status))} ${entry.responseTime.toFixed(0)} ms${tail}\n`;
  }
  return `${time} ${paint(level.color, level.name.padEnd(5))} ${String(entry.msg ?? "")}${tail}\n`;
}
