import type { Config } from "../config/settings.js";
import type { PullSettings } from "../engine/DirectoryModelStore.js";

/** The settings every pull is bound to, the server's (`POST /api/pull`, `serve --pull`) and `modelhost pull`'s alike. */
export function pullSettingsOf(config: Config): PullSettings {
  return { hfEndpoint: config.hfEndpoint, ...(config.hfToken ? { hfToken: config.hfToken } : {}), allowHttp: config.allowHttpPull };
}
