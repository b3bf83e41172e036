import { ModelRegistry } from "../engine/ModelRegistry.js";
import { formatBytes } from "../models/formatBytes.js";

/** The installed models as a table for the terminal. */
export async function listModels(directory: string): Promise<string> {
  const warnings: string[] = [];
  const registry = new ModelRegistry(directory, { logger: { warn: (message) => warnings.push(message) } });
  const models = await registry.list();
  if (models.length === 0) return [...warnings, `No models in ${directory}. Copy a .gguf file there.`].join("\n");
  const rows = [["ID", "ALIASES", "ARCH", "PARAMS", "CONTEXT", "SIZE", "TEMPLATE", "SERVES"]];
  for (const model of models) {
    rows.push([
      model.id,
      model.aliases.join(",") || "-",
      model.architecture,
      model.parameterCount ? humanCount(model.parameterCount) : "-",
      model.contextLength ? String(model.contextLength) : "-",
      formatBytes(model.sizeBytes),
      model.hasChatTemplate ? "yes" : "no",
      model.capabilities.join(","),
    ]);
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const table = rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd());
  return [...warnings, ...table].join("\n");
}

function humanCount(count: number): string {
  if (count >= 1e9) return `${(count / 1e9).toFixed(1)}B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M`;
  if (count >= 1e3) return `${(count / 1e3).toFixed(1)}K`;
  return String(count);
}
