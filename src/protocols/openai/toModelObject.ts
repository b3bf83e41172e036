import type { ModelInfo } from "../../core/ModelInfo.js";
import type { ModelObject } from "./schemas.js";

/**
 * One entry of GET /v1/models; an alias is listed as a model of its own, as callers address it.
 * `capabilities` is our addition (clients ignore unknown fields): which endpoints the model serves.
 */
export function toModelObject(model: ModelInfo, id = model.id): ModelObject {
  return { id, object: "model", created: model.created, owned_by: "modelhost", capabilities: model.capabilities };
}
