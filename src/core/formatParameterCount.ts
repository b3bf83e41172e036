/**
 * A model's parameter count as people read it: 494032768 → "494.03M", 3_212_749_888 → "3.2B",
 * 7e9 → "7B". The way Ollama writes `parameter_size`, which `modelhost list` and `show` print too.
 */
export function formatParameterCount(count: number): string {
  const scaled = (unit: number, suffix: string, decimals: number) => {
    const value = count / unit;
    return `${Number.isInteger(value) ? value : value.toFixed(decimals)}${suffix}`;
  };
  if (count >= 1e9) return scaled(1e9, "B", 1);
  if (count >= 1e6) return scaled(1e6, "M", 2);
  if (count >= 1e3) return `${Math.round(count / 1e3)}K`;
  return String(count);
}
