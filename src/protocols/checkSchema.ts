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
