import { CodedError } from "./CodedError.js";

/**
 * Every failure a client can see has one of these codes. HTTP status and the wire body are chosen
 * per protocol by the error handler; docs/errors.md documents each code (a test keeps it complete).
 */
export const errorCodes = [
  "invalid_json",
  "invalid_request",
  "context_length_exceeded",
  "model_not_found",
  "not_found",
  "previous_response_not_found",
  "request_too_large",
  "invalid_api_key",
  "forbidden",
  "not_signed_in",
  "sign_in_failed",
  "csrf_rejected",
  "origin_not_allowed",
  "host_not_allowed",
  "rate_limit_exceeded",
  "tokens_limit_reached",
  "limiter_unavailable",
  "overloaded",
  "model_load_failed",
  "engine_unavailable",
  "download_failed",
  "invalid_model_file",
  "insufficient_storage",
  "not_implemented",
  "internal_error",
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export interface ErrorDetails {
  /** The request field at fault, in the wire's own path syntax (e.g. `messages[2].content`). */
  param?: string;
  model?: string;
  /** Overrides the default message; must never carry internals such as paths or stack traces. */
  message?: string;
  /** Seconds after which retrying may succeed (sent as Retry-After). */
  retryAfter?: number;
  /** For rate_limit_exceeded: whether a request or a token limit was hit. */
  limitKind?: "requests" | "tokens";
  /** For rate_limit_exceeded: the limit that was hit (requests_per_minute, tokens_per_day, …), for metrics. */
  limit?: string;
  cause?: unknown;
}

const defaultMessages: Record<ErrorCode, (d: ErrorDetails) => string> = {
  invalid_json: () => "We could not parse the JSON body of your request. Send valid JSON.",
  invalid_request: (d) => (d.param ? `Invalid value for '${d.param}'.` : "Invalid request."),
  context_length_exceeded: () => "The prompt is longer than the model's context.",
  model_not_found: (d) => `The model \`${d.model ?? ""}\` does not exist or you do not have access to it.`,
  not_found: () => "Not found.",
  previous_response_not_found: () => "The previous response was not found: it is unknown, expired, deleted or another account's.",
  request_too_large: () => "The request body is too large.",
  invalid_api_key: () => "Incorrect API key provided. Send a valid personal access token as `Authorization: Bearer <token>`.",
  forbidden: () => "This credential may not do that.",
  not_signed_in: () => "You are not signed in to the playground, or your session has ended. Sign in again.",
  sign_in_failed: () => "Wrong account name or password.",
  csrf_rejected: () => "This request lacks the playground's CSRF proof, or comes from another origin; it was refused.",
  origin_not_allowed: () => "A web page of another origin may not call this server; the request was refused.",
  host_not_allowed: () => "This server does not answer to that host name; the request was refused.",
  rate_limit_exceeded: () => "Rate limit reached. Retry after the time in the Retry-After header.",
  tokens_limit_reached: () => "The request is larger than your tier allows per request.",
  limiter_unavailable: () => "Rate limiting is unavailable, so requests are refused for now. Retry shortly.",
  overloaded: () => "The server is overloaded: too many requests are waiting. Retry shortly.",
  model_load_failed: (d) => `The model \`${d.model ?? ""}\` could not be loaded.`,
  engine_unavailable: () => "The inference engine is unavailable: no llama.cpp binary could be loaded. Run `modelhost engine build`.",
  download_failed: () => "The model could not be downloaded. Try again; the download resumes where it stopped.",
  invalid_model_file: () => "The downloaded file is not a GGUF model llama.cpp could load; it was not installed.",
  insufficient_storage: () => "There is not enough free disk space in the models directory for this model.",
  not_implemented: () => "This server does not implement that.",
  internal_error: () => "The server had an error while processing your request.",
};

export class ServerError extends CodedError<ErrorCode> {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, details: ErrorDetails = {}) {
    super(details.message ?? defaultMessages[code](details), details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "ServerError";
    this.code = code;
    this.details = details;
  }

  get param(): string | undefined {
    return this.details.param;
  }
}

export function isServerError(error: unknown): error is ServerError {
  return error instanceof ServerError;
}
