// Limits on nested JSON, checked iteratively before anything recursive (parsing, schema checks,
// grammar conversion, template rendering) touches it, so hostile input gets a 400 instead of
// overflowing the stack. Documented in docs/errors.md and the README.

/** Deepest nesting of arrays and objects accepted in a request body or in a JSON text inside it. */
export const MAX_JSON_DEPTH = 128;

/**
 * Most objects one JSON Schema may hold (every subschema, definition and keyword value that is
 * an object counts). llama.cpp refuses the grammars of much larger schemas ("Failed to parse
 * grammar" from about 2,000 optional properties), and the checks and the converter recurse
 * through `$ref` chains, which this bounds too.
 */
export const MAX_SCHEMA_NODES = 512;

/**
 * Most objects all the JSON Schemas of one request may hold together (every tool's parameters
 * and the response format). Each schema is rendered into the prompt and compiled into one
 * grammar, both on the event loop: 128 tools of 511 objects each (2.6 MB of body) blocked it for
 * 2.4 s (0.6 s of it parsing the grammar in llama.cpp, the rest rendering and tokenizing the
 * tools); 2,048 objects keep that to about a sixtieth.
 */
export const MAX_REQUEST_SCHEMA_NODES = 2048;

/** How deep the JSON text nests, scanning iteratively (strings skipped); malformed text is measured as far as it goes. */
export function jsonTextDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 0x5c)
        i++; // backslash: skip the escaped character
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x5b || code === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (code === 0x5d || code === 0x7d) depth--;
  }
  return deepest;
}

/** How many objects a parsed JSON value holds, counted iteratively; stops counting past `limit`. */
export function countJsonObjects(value: unknown, limit: number): number {
  let count = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && count <= limit) {
    const next = pending.pop();
    if (typeof next !== "object" || next === null) continue;
    if (!Array.isArray(next)) count++;
    for (const child of Array.isArray(next) ? next : Object.values(next))
      if (typeof child === "object" && child !== null) pending.push(child);
  }
  return count;
}
