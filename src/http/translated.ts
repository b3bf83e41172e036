import type { Engine } from "../core/Engine.js";
import { ServerError } from "../core/ServerError.js";
import { modelOfBody } from "./modelOfBody.js";

/**
 * Runs a protocol's translator on a request. When it refuses the request (a content part it
 * cannot read, a tool it cannot follow, …), the model the request names is looked up first, and an
 * unknown model is the error reported: what the request asks of a model that does not exist is
 * beside the point ("'input_file' parts are not supported" sends a user looking in the wrong
 * place). Ollama orders its checks the same way: "model not found" before the request's content.
 * A translation that succeeds costs no lookup; the engine reports an unknown model itself.
 */
export async function translated<T>(engine: Engine, body: unknown, translate: (body: unknown) => T): Promise<T> {
  try {
    return translate(body);
  } catch (error) {
    const model = modelOfBody(body);
    if (error instanceof ServerError && model && !(await engine.findModel(model))) {
      throw new ServerError("model_not_found", { model, param: "model" });
    }
    throw error;
  }
}
