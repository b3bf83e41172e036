import pino, { type Logger } from "pino";

/** JSON logs on stdout. Credentials never reach them, whatever a request carries. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: ["req.headers.authorization", "req.headers.cookie", 'req.headers["x-api-key"]', "authorization", "token"],
      censor: "[redacted]",
    },
  });
}
