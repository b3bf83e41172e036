import { CodedError } from "../core/CodedError.js";
import { settings, type CommandName, type Config, type SettingKey } from "./settings.js";

export interface ConfigSources {
  /** Flag values by flag name (without "--"), e.g. { port: "8080" }. */
  flags?: Record<string, string | undefined>;
  env?: Record<string, string | undefined>;
  /** Values set by code (tests, embedding); they win over flags and environment. */
  overrides?: Partial<Config>;
}

/** A setting has a value its schema refuses; the message names the flag or variable it came from. */
export class ConfigError extends CodedError<"invalid_setting"> {
  override name = "ConfigError";
  readonly code = "invalid_setting";
}

/** Resolves every setting: override, then flag, then environment variable, then default. */
export function loadConfig(sources: ConfigSources = {}): Config {
  const { flags = {}, env = {}, overrides = {} } = sources;
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(settings) as SettingKey[]) {
    if (overrides[key] !== undefined) {
      config[key] = overrides[key];
      continue;
    }
    const spec = settings[key];
    const fromFlag = flags[spec.flag];
    const fromEnv = env[spec.env];
    const [text, origin] =
      fromFlag !== undefined
        ? [fromFlag, `--${spec.flag}`]
        : fromEnv !== undefined && fromEnv !== ""
          ? [fromEnv, spec.env]
          : [spec.default, `the default of --${spec.flag}`];
    const parsed = spec.schema.safeParse(text);
    if (!parsed.success) {
      const reason = parsed.error.issues[0]?.message ?? "is invalid";
      throw new ConfigError(`Invalid value "${text}" for ${origin}: ${reason}.`);
    }
    config[key] = parsed.data;
  }
  return config as Config;
}

/** The settings a command accepts, in declaration order. */
export function settingsFor(command: CommandName): SettingKey[] {
  return (Object.keys(settings) as SettingKey[]).filter((key) => settings[key].commands.includes(command));
}
