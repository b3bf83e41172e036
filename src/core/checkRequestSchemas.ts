import type { ChatRequest } from "./ChatRequest.js";
import { countJsonObjects, MAX_REQUEST_SCHEMA_NODES, MAX_SCHEMA_NODES } from "./jsonLimits.js";
import { ServerError } from "./ServerError.js";

/**
 * Refuses, before any of them is checked, rendered or compiled, a request whose JSON Schemas (tool
 * parameters, response format) hold more than MAX_REQUEST_SCHEMA_NODES objects together. The
 * protocols call it on the wire schemas first, since their per-schema checks are work too; the
 * engine calls it again on every request it is given, whatever protocol built it.
 */
export function checkSchemaBudget(schemas: readonly unknown[], param: string): void {
  let nodes = 0;
  for (const schema of schemas) {
    // A schema over the per-schema limit counts as that limit here: its own check refuses it
    // afterwards, naming it exactly (and counting stops there, so this stays cheap).
    nodes += Math.min(countJsonObjects(schema, MAX_SCHEMA_NODES), MAX_SCHEMA_NODES);
    if (nodes > MAX_REQUEST_SCHEMA_NODES) {
      throw new ServerError("invalid_request", {
        param,
        message: `The request's JSON Schemas (tool parameters and response format) hold more than ${MAX_REQUEST_SCHEMA_NODES} subschemas (objects) together, the most accepted in one request.`,
      });
    }
  }
}

export function checkRequestSchemas(request: Pick<ChatRequest, "tools" | "responseFormat">): void {
  const format = request.responseFormat.type === "json_schema" ? [request.responseFormat.schema] : [];
  checkSchemaBudget([...request.tools.map((tool) => tool.parameters), ...format], request.tools.length > 0 ? "tools" : "response_format");
}
