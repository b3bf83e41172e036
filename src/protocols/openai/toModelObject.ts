import { readsImages, type ModelInfo } from "../../core/ModelInfo.js";
import type { ModelObject } from "./schemas.js";

/**
 * One entry of GET /v1/models; an alias is listed as a model of its own, as callers address it.
 * `capabilities` is our addition (clients ignore unknown fields): which endpoints the model serves,
 * and for a chat model what its template gives it: `tools` (it is shown the tools offered) and
 * `thinking` (its replies may carry a thought), and `vision` (it reads images: it has a projector, or its upstream reads them).
 */
export function toModelObject(model: ModelInfo, id = model.id): ModelObject {
  const vision = readsImages(model) ? (["vision"] as const) : [];
  const capabilities = [...model.capabilities, ...(model.templateFeatures ?? []), ...vision];
  return { id, object: "model", created: model.created, owned_by: "modelhost", capabilities };
}
