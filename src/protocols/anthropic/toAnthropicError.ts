import type { ErrorCode, ServerError } from "../../core/ServerError.js";
import type { AnthropicErrorType, ErrorBody } from "./schemas.js";

/**
 * `error.type` per code, as Anthropic's API and its SDK know them. The HTTP status is the code's
 * own (http/errorStatus.ts, one table for every protocol), so overloaded_error goes out as 503
 * where Anthropic sends 529: the official SDK retries both (any status ≥ 500, honouring
 * Retry-After), and the error type says the same thing.
 */
const typeOf: Record<ErrorCode, AnthropicErrorType> = {
  invalid_json: "invalid_request_error",
  invalid_request: "invalid_request_error",
  context_length_exceeded: "invalid_request_error",
  model_not_found: "not_found_error",
  not_found: "not_found_error",
  previous_response_not_found: "invalid_request_error",
  request_too_large: "request_too_large",
  invalid_api_key: "authentication_error",
  forbidden: "permission_error",
  not_signed_in: "authentication_error",
  sign_in_failed: "authentication_error",
  csrf_rejected: "permission_error",
  origin_not_allowed: "permission_error",
  host_not_allowed: "permission_error",
  rate_limit_exceeded: "rate_limit_error",
  // A prompt over the tier's per-request cap: 413, like a body over the size limit.
  tokens_limit_reached: "request_too_large",
  limiter_unavailable: "overloaded_error",
  overloaded: "overloaded_error",
  model_load_failed: "api_error",
  engine_unavailable: "overloaded_error",
  download_failed: "api_error",
  invalid_model_file: "api_error",
  insufficient_storage: "api_error",
  not_implemented: "invalid_request_error",
  internal_error: "api_error",
};

/**
 * The `{type:"error", error:{type, message}, request_id}` body of the Messages API; `request_id`
 * (the SDK's `_request_id` on errors) when the request's id is given. Error events inside a
 * stream carry none, as Anthropic's documented ones do not.
 */
export function toAnthropicError(error: ServerError, requestId?: string): ErrorBody {
  // The default text names only the Authorization header; this API's clients send x-api-key.
  const message =
    error.code === "invalid_api_key" && error.details.message === undefined
      ? "Invalid API key. Send a valid personal access token as `x-api-key: <token>` or `Authorization: Bearer <token>`."
      : error.message;
  return { type: "error", error: { type: typeOf[error.code], message }, ...(requestId === undefined ? {} : { request_id: requestId }) };
}
