import { jsonTextDepth, MAX_JSON_DEPTH } from "../core/jsonLimits.js";
import { findUnsupportedSchemaFeature } from "../core/jsonSchemaSupport.js";
import { ServerError } from "../core/ServerError.js";

/** Refuses, naming the exact place, a schema feature that grammar-constrained decoding cannot enforce. */
export function checkSchema(schema: unknown, param: string, owner: string): void {
  const unsupported = findUnsupportedSchemaFeature(schema);
  if (!unsupported) return;
  const at = [param, unsupported.path, unsupported.keyword].filter(Boolean).join(".");
  throw new ServerError("invalid_request", {
    param: at,
    message: `Invalid schema for ${owner}: '${unsupported.keyword}' at '${at}' is not supported (${unsupported.reason}).`,
  });
}

/** Tool arguments and results are JSON texts that the prompt template renders recursively: their nesting is limited like the body's. */
export function checkJsonDepth(text: string, param: string): string {
  if (jsonTextDepth(text) <= MAX_JSON_DEPTH) return text;
  throw new ServerError("invalid_request", {
    param,
    message: `Invalid value for '${param}': the JSON nests deeper than ${MAX_JSON_DEPTH} levels, the most accepted.`,
  });
}
