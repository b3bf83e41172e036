import { ServerError } from "./ServerError.js";

// Names in the `name:tag` form of local runtimes, where a name without a tag means `name:latest`.
// The tag is what follows the last colon after the last slash, so a host's port
// (`localhost:5000/model`) is not a tag.

const DEFAULT_TAG = "latest";

function tagIndex(name: string): number {
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? colon : -1;
}

/** The names a requested name may be installed under, in order: `x` and `x:latest` are the same model. */
export function nameCandidates(name: string): string[] {
  const colon = tagIndex(name);
  if (colon === -1) return [name, `${name}:${DEFAULT_TAG}`];
  if (name.slice(colon + 1) === DEFAULT_TAG) return [name, name.slice(0, colon)];
  return [name];
}

/** The name with its tag spelled out: `qwen2.5` → `qwen2.5:latest`; `qwen2.5:0.5b` unchanged. */
export function withTag(name: string): string {
  return tagIndex(name) === -1 ? `${name}:${DEFAULT_TAG}` : name;
}

/**
 * The grammar of a model name, the one rule for every name a client, the CLI or models.json gives a
 * model: `[host/][namespace/]name[:tag]`, as in Ollama (`qwen2.5:0.5b`,
 * `hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M`). Each part is 1 to 128 characters among
 * letters, digits, `.`, `_` and `-`, begins with a letter or a digit, does not end with `.`, has no
 * `..`, and is no Windows device name (`NUL`, `con.gguf`, …); the whole name is at most 255
 * characters. So a name can never be a path, a path element such as `..`, a hidden file or a
 * device, whatever it is later used for. A host carries no `:port`: a name is a label, not an
 * address, and a colon always starts the tag.
 */
export const MAX_NAME_PART_LENGTH = 128;
export const MAX_NAME_LENGTH = 255;

const partPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Windows refuses these as file names, with any extension and in any case. */
const deviceNamePattern = /^(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:\.|$)/i;

const grammar = "a model name is [host/][namespace/]name[:tag] of letters, digits, '.', '_' and '-'";

/** Why `name` is not a valid model name, or undefined when it is. */
export function modelNameProblem(name: string): string | undefined {
  if (name.length === 0) return "a model name must not be empty";
  if (name.length > MAX_NAME_LENGTH) return `a model name is at most ${MAX_NAME_LENGTH} characters`;
  const colon = name.indexOf(":");
  if (colon !== -1 && name.indexOf(":", colon + 1) !== -1) return `${grammar}, with one ':' at most`;
  const path = colon === -1 ? name : name.slice(0, colon);
  const parts = path.split("/");
  if (parts.length > 3) return `${grammar}, with two '/' at most`;
  if (colon !== -1) parts.push(name.slice(colon + 1));
  for (const part of parts) {
    const problem = namePartProblem(part);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function namePartProblem(part: string): string | undefined {
  if (part.length === 0) return `${grammar}; no part may be empty`;
  if (part.length > MAX_NAME_PART_LENGTH) return `each part of a model name is at most ${MAX_NAME_PART_LENGTH} characters`;
  if (!partPattern.test(part)) return `${grammar}, each part beginning with a letter or a digit`;
  if (part.includes("..") || part.endsWith(".")) return `${grammar}; no part may contain '..' or end with '.'`;
  if (isWindowsDeviceName(part)) return `"${part}" is a reserved device name on Windows`;
  return undefined;
}

/** Whether Windows takes `name` for a device (`NUL`, `con.gguf`, `Com1.txt`), whatever its case and extension. */
export function isWindowsDeviceName(name: string): boolean {
  return deviceNamePattern.test(name);
}

/** Whether `name` fits the model name grammar. */
export function isValidModelName(name: string): boolean {
  return modelNameProblem(name) === undefined;
}

/** Throws `invalid_request` (400) naming the request field when `name` is not a valid model name. */
export function assertModelName(name: string, param: string): void {
  const problem = modelNameProblem(name);
  if (problem !== undefined) throw new ServerError("invalid_request", { param, message: `Invalid value for '${param}': ${problem}.` });
}
