import { serverLogger, serveWith, type ServeOptions } from "../../src/cli/serve.js";
import type { Config } from "../../src/config/settings.js";
import type { Engine } from "../../src/core/Engine.js";
import { EmptyModelStore } from "./emptyModelStore.js";

/**
 * serve()'s composition (src/cli/serve.ts, serveWith) around an engine of the test's own (a
 * FakeEngine) instead of llama.cpp's, in either profile. Its model store has no models (these
 * servers change none).
 */
export async function serveEngine(engine: Engine, config: Config, options: ServeOptions = {}) {
  return serveWith(config, { engine, models: new EmptyModelStore(), logger: serverLogger(config, options) }, options);
}
