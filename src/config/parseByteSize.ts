const multipliers: Record<string, number> = { b: 1, kb: 1024, kib: 1024, mb: 1024 ** 2, mib: 1024 ** 2, gb: 1024 ** 3, gib: 1024 ** 3 };

/** Parses "10mb", "512kb", "1048576" (bytes). Units are binary (1kb = 1024 bytes). */
export function parseByteSize(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  if (!match) return undefined;
  const multiplier = multipliers[(match[2] || "b").toLowerCase()];
  return multiplier === undefined ? undefined : Math.floor(Number(match[1]) * multiplier);
}
