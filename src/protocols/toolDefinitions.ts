import type { ResponseFormat, ToolChoice, ToolDefinition } from "../core/ChatRequest.js";
import { ServerError } from "../core/ServerError.js";
import { checkSchema } from "./checkSchema.js";

// Function tools, tool choice and JSON-schema formats as every OpenAI-style protocol checks them
// (chat completions nests a tool under `function`, the Responses API does not: only the paths differ).

export interface FunctionSpec {
  name: string;
  description?: string | null | undefined;
  parameters?: Record<string, unknown> | null | undefined;
}

/** Validated tool definitions; `paramOf(i)` is the wire path of tool i's function (`tools[0].function`, `tools[0]`). */
export function toToolDefinitions(specs: readonly FunctionSpec[], paramOf: (index: number) => string): ToolDefinition[] {
  const seen = new Set<string>();
  return specs.map((fn, i) => {
    const param = paramOf(i);
    if (seen.has(fn.name)) {
      throw new ServerError("invalid_request", {
        param: `${param}.name`,
        message: `Invalid value for '${param}.name': another tool is already named '${fn.name}'.`,
      });
    }
    seen.add(fn.name);
    // OpenAI: "Omitting parameters defines a function with an empty parameter list."
    const parameters = fn.parameters ?? { type: "object", properties: {} };
    if (parameters.type !== "object") {
      throw new ServerError("invalid_request", {
        param: `${param}.parameters.type`,
        message: `Invalid schema for function '${fn.name}': the parameters must be a JSON Schema with "type": "object".`,
      });
    }
    checkSchema(parameters, `${param}.parameters`, `function '${fn.name}'`);
    return { name: fn.name, ...(fn.description == null ? {} : { description: fn.description }), parameters };
  });
}

/**
 * The engine's tool choice: `{name}` is a named function, which must be one of the tools
 * (`nameParam` is its wire path). Absent: OpenAI's default, "none" without tools, "auto" with them.
 */
export function toToolChoice(
  wire: "none" | "auto" | "required" | { name: string } | null | undefined,
  tools: readonly ToolDefinition[],
  nameParam: string,
): ToolChoice {
  if (wire == null) return { type: tools.length > 0 ? "auto" : "none" };
  if ((wire === "required" || typeof wire === "object") && tools.length === 0) {
    throw new ServerError("invalid_request", {
      param: "tool_choice",
      message: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
    });
  }
  if (typeof wire === "string") return { type: wire };
  if (!tools.some((tool) => tool.name === wire.name)) {
    throw new ServerError("invalid_request", {
      param: nameParam,
      message: `Invalid value for '${nameParam}': no tool named '${wire.name}' is in 'tools'.`,
    });
  }
  return { type: "function", name: wire.name };
}

/** A json_schema format, its schema checked for what grammar-constrained decoding can enforce. */
export function toJsonSchemaFormat(name: string, schema: Record<string, unknown> | boolean, param: string): ResponseFormat {
  checkSchema(schema, param, `response format '${name}'`);
  return { type: "json_schema", name, schema };
}
