import type { Engine } from "../core/Engine.js";
import type { EngineStatus, ModelInfo } from "../core/ModelInfo.js";
import type { UpstreamEngine } from "./UpstreamEngine.js";

/**
 * The models this server runs in process and those upstream servers run for it, as one Engine: each
 * call goes to the engine that serves the model it names. A name declared upstream is served
 * there, also where a local file has it too (the operator declared it on purpose).
 */
export class FleetEngine implements Engine {
  readonly #local: Engine;
  readonly #upstream: UpstreamEngine;

  constructor(local: Engine, upstream: UpstreamEngine) {
    this.#local = local;
    this.#upstream = upstream;
  }

  #for(name: string): Engine {
    return this.#upstream.serves(name) ? this.#upstream : this.#local;
  }

  async listModels(): Promise<ModelInfo[]> {
    const upstream = await this.#upstream.listModels();
    const local = (await this.#local.listModels()).filter((model) => !this.#upstream.serves(model.id));
    return [...local, ...upstream];
  }

  findModel: Engine["findModel"] = (name) => this.#for(name).findModel(name);
  chat: Engine["chat"] = (request, options) => this.#for(request.model).chat(request, options);
  chatChoices: Engine["chatChoices"] = (request, options) => this.#for(request.model).chatChoices(request, options);
  renderPrompt: Engine["renderPrompt"] = (request, options) => this.#for(request.model).renderPrompt(request, options);
  embed: Engine["embed"] = (request, options) => this.#for(request.model).embed(request, options);
  rerank: Engine["rerank"] = (request, options) => this.#for(request.model).rerank(request, options);
  tokenize: Engine["tokenize"] = (request, options) => this.#for(request.model).tokenize(request, options);
  detokenize: Engine["detokenize"] = (request, options) => this.#for(request.model).detokenize(request, options);
  load: Engine["load"] = (name, options) => this.#for(name).load(name, options);
  unload: Engine["unload"] = (name) => this.#for(name).unload(name);
  describeModel: Engine["describeModel"] = (name) => this.#for(name).describeModel(name);
  modelDigest: Engine["modelDigest"] = (model) => this.#for(model.id).modelDigest(model);

  /** The in-process engine's: upstream models hold no memory here. */
  status(): EngineStatus {
    return this.#local.status();
  }

  async close(): Promise<void> {
    await Promise.all([this.#local.close(), this.#upstream.close()]);
  }
}
