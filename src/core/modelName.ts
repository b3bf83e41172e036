// Names in the `name:tag` form of local runtimes, where a name without a tag means `name:latest`.
// The tag is what follows the last colon after the last slash, so a host's port
// (`localhost:5000/model`) is not a tag.

export const DEFAULT_TAG = "latest";

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
