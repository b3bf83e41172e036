import type { ErrorCode } from "../core/ServerError.js";

/** The HTTP status of each error code; the same for every protocol served over HTTP. */
export const errorStatus: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_request: 400,
  context_length_exceeded: 400,
  model_not_found: 404,
  not_found: 404,
  // OpenAI answers an unknown previous_response_id with 400: it is a field of the request that is wrong.
  previous_response_not_found: 400,
  request_too_large: 413,
  invalid_api_key: 401,
  forbidden: 403,
  not_signed_in: 401,
  sign_in_failed: 401,
  csrf_rejected: 403,
  origin_not_allowed: 403,
  host_not_allowed: 403,
  rate_limit_exceeded: 429,
  tokens_limit_reached: 413,
  limiter_unavailable: 503,
  overloaded: 503,
  model_load_failed: 500,
  engine_unavailable: 503,
  download_failed: 502,
  // What the hub or URL served is at fault, as with download_failed; retrying fetches the same bytes.
  invalid_model_file: 502,
  insufficient_storage: 507,
  not_implemented: 501,
  internal_error: 500,
};
