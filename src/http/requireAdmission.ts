import type { Engine, RequestOptions } from "../core/Engine.js";
import { decorateEngine } from "../core/decorateEngine.js";
import { ServerError } from "../core/ServerError.js";
import { same, type Same } from "../protocols/sameShape.js";

/**
 * Each engine call, and whether it consumes tokens and so needs the caller's admission in the
 * hosted profile. A method added to Engine fails to compile until it is classified: fail closed.
 */
interface NeedsAdmission {
  chat: true;
  chatChoices: true;
  embed: true;
  renderPrompt: true;
  rerank: true;
  tokenize: true;
  detokenize: true;
  // Loading, unloading and reading models consume no tokens: a caller's token is enough.
  listModels: false;
  findModel: false;
  load: false;
  unload: false;
  describeModel: false;
  modelDigest: false;
  status: false;
  close: false;
}
same<Same<keyof NeedsAdmission, keyof Engine>>(true);

type AdmittedMethod = { [Name in keyof NeedsAdmission]: NeedsAdmission[Name] extends true ? Name : never }[keyof NeedsAdmission];

/**
 * The engine as the hosted profile's routes see it: a call that consumes tokens without an
 * admission (a route that forgot the caller's limits) is a bug, refused as an internal error
 * rather than served for free.
 */
export function requireAdmission(engine: Engine): Engine {
  const admitted = (options: RequestOptions): RequestOptions => {
    if (!options.admit)
      throw new ServerError("internal_error", { cause: new Error("Hosted profile: an engine call reached the engine without admission.") });
    return options;
  };
  const checked: Pick<Engine, AdmittedMethod> = {
    chat: async (request, options) => engine.chat(request, admitted(options)),
    chatChoices: async (request, options) => engine.chatChoices(request, admitted(options)),
    embed: async (request, options) => engine.embed(request, admitted(options)),
    renderPrompt: async (request, options) => engine.renderPrompt(request, admitted(options)),
    rerank: async (request, options) => engine.rerank(request, admitted(options)),
    tokenize: async (request, options) => engine.tokenize(request, admitted(options)),
    detokenize: async (request, options) => engine.detokenize(request, admitted(options)),
  };
  return decorateEngine(engine, checked);
}
