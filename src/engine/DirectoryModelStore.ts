import type { Engine } from "../core/Engine.js";
import type { ModelDeletion, ModelStore, PullRequestOptions, PullResult } from "../core/ModelStore.js";
import { ServerError } from "../core/ServerError.js";
import { addAlias, deleteModel, removeAlias } from "../models/modelsManifest.js";
import { pullModel, type PullOptions } from "../models/pullModel.js";
import type { ModelRegistry } from "./ModelRegistry.js";

/** What every pull of a store is bound to: the server's (or the CLI's) settings. */
export type PullSettings = Pick<PullOptions, "hfEndpoint" | "hfToken" | "allowHttp">;

export interface DirectoryModelStoreOptions {
  /** Bound to every pull (--hf-endpoint, the token, --allow-http-pull). */
  pull: PullSettings;
  /**
   * The engine that runs models from the registry's directory, told to unload a model that is
   * deleted. Absent where none runs (the CLI).
   */
  engine?: Pick<Engine, "unload">;
}

/**
 * The models of one directory (models.json and the .gguf files beside it), changed through the
 * registry the engine resolves names with. Here, and not in models/, because a change must reach
 * the engine: a deleted model is unloaded, and the registry's names are scanned afresh so the
 * change is seen from the next request on (a lookup may otherwise answer from a scan up to 1 s old).
 */
export class DirectoryModelStore implements ModelStore {
  readonly #registry: ModelRegistry;
  readonly #options: DirectoryModelStoreOptions;

  constructor(registry: ModelRegistry, options: DirectoryModelStoreOptions) {
    this.#registry = registry;
    this.#options = options;
  }

  async copy(source: string, destination: string): Promise<void> {
    const model = await this.#registry.find(source);
    if (!model) throw new ServerError("model_not_found", { model: source, param: "source", message: `model "${source}" not found` });
    await addAlias(this.#registry.directory, model.path, destination);
    await this.#rescan();
  }

  async delete(name: string): Promise<ModelDeletion> {
    const model = await this.#registry.find(name);
    if (!model) throw new ServerError("model_not_found", { model: name, param: "model" });
    // An alias goes alone; the model's own name takes its file, its other names and its aliases.
    if (name !== model.id && (await removeAlias(this.#registry.directory, name))) {
      await this.#rescan();
      return { kind: "alias", model };
    }
    await this.#options.engine?.unload(model.id);
    await deleteModel(this.#registry.directory, model.path);
    await this.#rescan();
    return { kind: "model", model };
  }

  async pull(reference: string, options: PullRequestOptions = {}): Promise<PullResult> {
    const result = await pullModel(reference, { modelsDir: this.#registry.directory, ...this.#options.pull, ...options });
    // A new name resolves anyway (a lookup scans again before "not found"), but a file that was
    // listed under its file name gets the reference as its id, and the old name must stop resolving.
    await this.#rescan();
    return result;
  }

  /** Scans the directory now, so the registry's next lookups answer from the changed names. */
  async #rescan(): Promise<void> {
    await this.#registry.list();
  }
}
