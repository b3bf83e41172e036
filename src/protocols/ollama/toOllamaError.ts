import type { ServerError } from "../../core/ServerError.js";
import type { ErrorBody } from "./schemas.js";

/**
 * The native error body, `{"error": "…"}`. An unknown model gets the reference server's own text,
 * which its clients match on (status 404 and "not found") to offer pulling the model.
 */
export function toOllamaError(error: ServerError): ErrorBody {
  if (error.code === "model_not_found") return { error: `model "${error.details.model ?? ""}" not found, try pulling it first` };
  return { error: error.message };
}
