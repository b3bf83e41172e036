/**
 * The options the bench's own scripts (bench/speculation.ts, bench/lora.ts) share, for
 * node:util's parseArgs: rounds, threads, engine, and where the JSON goes.
 */
export const scriptOptions = {
  rounds: { type: "string", default: "3" },
  threads: { type: "string", default: "2" },
  engine: { type: "string", default: "auto" },
  json: { type: "string" },
} as const;
