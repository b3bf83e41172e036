/**
 * Matches browser origins against configured patterns: "*" allows any origin, and ":*" in place
 * of a port allows any port ("http://localhost:*" matches http://localhost and http://localhost:5173).
 */
export function corsOriginMatcher(patterns: readonly string[]): (origin: string) => boolean {
  if (patterns.includes("*")) return () => true;
  const regexes = patterns.map((pattern) => {
    const anyPort = pattern.endsWith(":*");
    const base = (anyPort ? pattern.slice(0, -2) : pattern).replace(/\/+$/, "");
    const escaped = base.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return new RegExp(`^${escaped}${anyPort ? "(:\\d+)?" : ""}$`, "i");
  });
  return (origin) => regexes.some((regex) => regex.test(origin));
}
