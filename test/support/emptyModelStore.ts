import type { ModelDeletion, ModelStore, PullResult } from "../../src/core/ModelStore.js";
import { ServerError } from "../../src/core/ServerError.js";

/**
 * A model store with no models and nothing to pull, for apps built around a fake engine: every
 * name is model_not_found, as the real store answers for a name no model has.
 */
export class EmptyModelStore implements ModelStore {
  async copy(source: string): Promise<void> {
    throw new ServerError("model_not_found", { model: source, param: "source", message: `model "${source}" not found` });
  }

  async delete(name: string): Promise<ModelDeletion> {
    throw new ServerError("model_not_found", { model: name, param: "model" });
  }

  async pull(reference: string): Promise<PullResult> {
    throw new ServerError("model_not_found", { model: reference, message: `Nothing to pull: this store has no source for ${reference}.` });
  }
}
