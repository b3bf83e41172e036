import type { Engine } from "./Engine.js";

/**
 * Every method of the Engine interface. `satisfies` makes a method added to the interface fail to
 * compile here until it is listed, so decorateEngine passes every one through.
 */
const ENGINE_METHODS = {
  listModels: true,
  findModel: true,
  chat: true,
  chatChoices: true,
  renderPrompt: true,
  embed: true,
  rerank: true,
  tokenize: true,
  detokenize: true,
  load: true,
  unload: true,
  describeModel: true,
  modelDigest: true,
  status: true,
  close: true,
} as const satisfies Record<keyof Engine, true>;

/**
 * An engine that runs `overrides` for the methods they give and `inner`'s own for every other: the
 * one way the server wraps its engine (metrics' measurements, the hosted profile's admission check).
 */
export function decorateEngine(inner: Engine, overrides: Partial<Engine>): Engine {
  const decorated: Partial<Record<keyof Engine, unknown>> = {};
  for (const name of Object.keys(ENGINE_METHODS) as (keyof Engine)[]) {
    // Called on the inner engine, whose methods may use its private fields, and looked up at each
    // call, as a method call on it would be.
    decorated[name] = overrides[name] ?? ((...args: never[]) => (inner[name] as (...args: never[]) => unknown).apply(inner, args));
  }
  return decorated as Engine;
}
