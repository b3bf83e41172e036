import type { ErrorCode, ServerError } from "../../core/ServerError.js";
import type { ErrorBody } from "./schemas.js";

/** `error.type` per code, as the OpenAI API and its clients know them. */
const typeOf: Record<ErrorCode, string> = {
  invalid_json: "invalid_request_error",
  invalid_request: "invalid_request_error",
  context_length_exceeded: "invalid_request_error",
  model_not_found: "invalid_request_error",
  not_found: "invalid_request_error",
  previous_response_not_found: "invalid_request_error",
  request_too_large: "invalid_request_error",
  invalid_api_key: "invalid_request_error",
  forbidden: "invalid_request_error",
  not_signed_in: "invalid_request_error",
  sign_in_failed: "invalid_request_error",
  csrf_rejected: "invalid_request_error",
  origin_not_allowed: "invalid_request_error",
  host_not_allowed: "invalid_request_error",
  // OpenAI sends "requests" or "tokens" as the type of a 429, by the limit that was hit.
  rate_limit_exceeded: "requests",
  tokens_limit_reached: "invalid_request_error",
  limiter_unavailable: "server_error",
  overloaded: "server_error",
  model_load_failed: "server_error",
  engine_unavailable: "server_error",
  download_failed: "server_error",
  invalid_model_file: "server_error",
  insufficient_storage: "server_error",
  not_implemented: "invalid_request_error",
  internal_error: "server_error",
};

/** The `{error:{message,type,param,code}}` body. Internal errors carry no code, as OpenAI's don't. */
export function toOpenAIError(error: ServerError): ErrorBody {
  return {
    error: {
      message: error.message,
      type: error.code === "rate_limit_exceeded" && error.details.limitKind === "tokens" ? "tokens" : typeOf[error.code],
      param: error.param ?? null,
      code: error.code === "internal_error" || error.code === "invalid_request" ? null : error.code,
    },
  };
}
