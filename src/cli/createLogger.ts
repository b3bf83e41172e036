import pino, { type DestinationStream, type Logger } from "pino";

/** JSON logs on stdout (or the given stream). Credentials never reach them, whatever a request carries. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: {
      paths: ["req.headers.authorization", "req.headers.cookie", 'req.headers["x-api-key"]', "authorization", "token", "secret"],
      censor: "[redacted]",
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
