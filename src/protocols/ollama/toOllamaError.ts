import type { ServerError } from "../../core/ServerError.js";
import type { ErrorBody } from "./schemas.js";

/**
 * The native error body, `{"error": "…"}`. An unknown model gets the reference server's own text,
 * which its clients match on (status 404 and "not found") to offer pulling the model, unless the
 * error says otherwise (copy's source: `model "x" not found`).
 */
export function toOllamaError(error: ServerError): ErrorBody {
  if (error.code === "model_not_found" && error.details.message === undefined) {
    return { error: `model "${error.details.model ?? ""}" not found, try pulling it first` };
  }
  return { error: error.message };
}
