import type { ModelInfo } from "../../core/ModelInfo.js";
import type { ModelObject } from "./schemas.js";

/** One entry of GET /v1/models; an alias is listed as a model of its own, as callers address it. */
export function toModelObject(model: ModelInfo, id = model.id): ModelObject {
  return { id, object: "model", created: model.created, owned_by: "modelhost" };
}
