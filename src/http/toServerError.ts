import { ServerError } from "../core/ServerError.js";

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message?: string;
}

/**
 * Any thrown value as a coded error. Fastify's own body-parsing failures become the matching
 * client errors; anything unexpected becomes `internal_error`, whose message reveals nothing.
 */
export function toServerError(error: unknown): ServerError {
  if (error instanceof ServerError) return error;
  const { code, statusCode } = (error ?? {}) as FastifyLikeError;
  switch (code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ServerError("request_too_large", { cause: error });
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return new ServerError("invalid_json", { cause: error });
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      // Bodies are read as JSON whatever the Content-Type; only a header that is not a media type at all is refused.
      return new ServerError("invalid_request", {
        cause: error,
        message: "The Content-Type header is not a valid media type. Send `Content-Type: application/json` or leave it out.",
      });
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ServerError("invalid_request", { cause: error, message: "The Content-Length header does not match the body." });
  }
  // JSON.parse failures from the body parser carry status 400.
  if (error instanceof SyntaxError && statusCode === 400) return new ServerError("invalid_json", { cause: error });
  if (statusCode === 413) return new ServerError("request_too_large", { cause: error });
  return new ServerError("internal_error", { cause: error });
}
