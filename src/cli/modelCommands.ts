import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import type { Config } from "../config/settings.js";
import { formatParameterCount } from "../core/formatParameterCount.js";
import type { ModelInfo } from "../core/ModelInfo.js";
import { modelNameProblem } from "../core/modelName.js";
import { isServerError } from "../core/ServerError.js";
import { DirectoryModelStore } from "../engine/DirectoryModelStore.js";
import { ModelRegistry } from "../engine/ModelRegistry.js";
import { formatBytes } from "../models/formatBytes.js";
import { readManifest, type ManifestEntry } from "../models/modelsManifest.js";
import { pullModel } from "../models/pullModel.js";
import { formatListing, formatTable } from "./formatTable.js";
import { progressPrinter } from "./pullProgress.js";
import { pullSettingsOf } from "./pullSettings.js";
import { ServerClient, serverUrl } from "./serverClient.js";
import { UsageError } from "./UsageError.js";

/** A model as `list --json` and `show --json` print it: what the registry knows, and where it came from. */
type ModelRecord = ModelInfo & { source?: string; sha256?: string };

/** Parses a model command's own arguments (the settings' flags are taken out before). */
function parseCommandArgs(args: string[], usage: string, options: { pull?: boolean } = {}) {
  try {
    return parseArgs({
      args,
      options: {
        json: { type: "boolean", default: false },
        ...(options.pull ? { alias: { type: "string", multiple: true }, "adapter-of": { type: "string" } } : {}),
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\nUsage: ${usage}`);
  }
}

function one(positionals: string[], what: string, usage: string): string {
  if (positionals.length !== 1) throw new UsageError(`Give one ${what}.\n\nUsage: ${usage}`);
  return positionals[0]!;
}

function openRegistry(config: Config): { registry: ModelRegistry; warnings: string[] } {
  const warnings: string[] = [];
  return { registry: new ModelRegistry(config.modelsDir, { logger: { warn: (message) => warnings.push(message) } }), warnings };
}

async function recordsOf(config: Config, models: ModelInfo[]): Promise<ModelRecord[]> {
  const { entries } = await readManifest(config.modelsDir);
  return models.map((model) => {
    const entry: ManifestEntry | undefined = entries.find((candidate) => path.resolve(config.modelsDir, candidate.file) === model.path);
    return { ...model, ...(entry?.source ? { source: entry.source } : {}), ...(entry?.sha256 ? { sha256: entry.sha256 } : {}) };
  });
}

/** `modelhost list` (also `models`): the installed models as a table, or JSON. */
export async function listCommand(args: string[], config: Config): Promise<string> {
  const usage = "modelhost list [--json] [--models-dir DIR]";
  const { values, positionals } = parseCommandArgs(args, usage);
  if (positionals.length > 0) throw new UsageError(`Unexpected argument "${positionals[0]}".\n\nUsage: ${usage}`);
  const { registry, warnings } = openRegistry(config);
  const models = await recordsOf(config, await registry.list());
  if (values.json) return JSON.stringify(models, null, 2);
  const partial = await partialDownloads(config.modelsDir);
  if (partial.count > 0) {
    warnings.push(
      `${partial.count} interrupted download(s) (${formatBytes(partial.bytes)}) wait in ${config.modelsDir} as .*.partial files: pull again to resume, or delete them.`,
    );
  }
  if (models.length === 0)
    return [
      ...warnings,
      `No models in ${config.modelsDir}. Pull one (modelhost pull hf.co/OWNER/REPO:QUANT) or copy a .gguf file there.`,
    ].join("\n");
  const table = formatListing(
    models,
    false,
    ["ID", "ALIASES", "ARCH", "PARAMS", "QUANT", "CONTEXT", "SIZE", "TEMPLATE", "SERVES"],
    (model) => [
      model.id,
      model.aliases.join(",") || "-",
      model.architecture,
      model.parameterCount ? formatParameterCount(model.parameterCount) : "-",
      model.quantization ?? "-",
      model.contextLength ? String(model.contextLength) : "-",
      formatBytes(model.sizeBytes),
      model.hasChatTemplate ? "yes" : "no",
      model.capabilities.join(","),
    ],
  );
  return [...warnings, table].join("\n");
}

/** `modelhost show MODEL`: one model's details. */
export async function showCommand(args: string[], config: Config): Promise<string> {
  const usage = "modelhost show MODEL [--json] [--models-dir DIR]";
  const { values, positionals } = parseCommandArgs(args, usage);
  const name = one(positionals, "MODEL", usage);
  const { registry } = openRegistry(config);
  const found = await registry.find(name);
  if (!found) throw notInstalled(name, config);
  const [model] = await recordsOf(config, [found]);
  if (values.json) return JSON.stringify(model, null, 2);
  const rows: [string, string | undefined][] = [
    ["id", model!.id],
    ["aliases", model!.aliases.join(", ") || "-"],
    ["file", model!.path],
    ["size", formatBytes(model!.sizeBytes)],
    ["architecture", model!.architecture],
    ["parameters", model!.parameterCount ? formatParameterCount(model!.parameterCount) : undefined],
    ["quantization", model!.quantization],
    ["context length", model!.contextLength?.toString()],
    ["embedding length", model!.embeddingLength?.toString()],
    ["chat template", model!.hasChatTemplate ? "yes (from the file)" : "no (a general format is used)"],
    ["serves", model!.capabilities.join(", ")],
    ["source", model!.source],
    ["sha256", model!.sha256],
  ];
  return formatTable(rows.filter((row): row is [string, string] => row[1] !== undefined).map(([key, value]) => [key, value]));
}

/**
 * `modelhost rm MODEL`: an alias goes alone; a model's id takes its file (every part), its
 * entry in models.json and its aliases, as `DELETE /api/delete` does.
 */
export async function rmCommand(args: string[], config: Config): Promise<string> {
  const usage = "modelhost rm MODEL [--models-dir DIR]";
  const { positionals } = parseCommandArgs(args, usage);
  const name = validName(one(positionals, "MODEL", usage), usage);
  const { registry } = openRegistry(config);
  // The server's store, with no engine to unload from: the same rule for what a name takes with it.
  const store = new DirectoryModelStore(registry, { pull: pullSettingsOf(config) });
  const deletion = await store.delete(name).catch((error: unknown) => {
    throw isServerError(error) && error.code === "model_not_found" ? notInstalled(name, config) : error;
  });
  const { model } = deletion;
  switch (deletion.kind) {
    case "alias":
      return `Removed the alias ${name} (of ${model.id}).`;
    case "model":
      return `Deleted ${model.id} (${formatBytes(model.sizeBytes)}${model.aliases.length > 0 ? `; its aliases ${model.aliases.join(", ")} too` : ""}).`;
  }
}

/** `modelhost pull REF`: downloads into the models directory, with progress on stderr. Ctrl-C stops; pulling again resumes. */
export async function pullCommand(args: string[], config: Config): Promise<string> {
  const usage = "modelhost pull REF [--alias NAME]… [--adapter-of MODEL] [--models-dir DIR] [--hf-endpoint URL] [--allow-http-pull true]";
  const { values, positionals } = parseCommandArgs(args, usage, { pull: true });
  const adapterOf = values["adapter-of"] as string | undefined;
  const aliases = ((values.alias as string[] | undefined) ?? []).map((alias) => validName(alias, usage));
  const reference = one(
    positionals,
    "REF (hf.co/OWNER/REPO:QUANT, OWNER/REPO:QUANT, hf.co/OWNER/REPO/FILE.gguf or an https:// URL)",
    usage,
  );
  const progress = progressPrinter(process.stderr);
  const controller = new AbortController();
  const interrupt = () => controller.abort(new UsageError("Interrupted. Run the same command again to resume the download."));
  process.once("SIGINT", interrupt);
  try {
    const result = await pullModel(reference, {
      modelsDir: config.modelsDir,
      ...pullSettingsOf(config),
      aliases,
      ...(adapterOf === undefined ? {} : { adapterOf }),
      signal: controller.signal,
      onProgress: (event) => progress.update(event),
    });
    progress.finish();
    const fetched = result.downloadedBytes > 0 ? `downloaded ${formatBytes(result.downloadedBytes)}` : "already up to date";
    const served = result.adapter === undefined ? "" : `; served as ${result.adapter}`;
    return `${result.id}: ${fetched}, in ${path.dirname(result.path)}${served}.`;
  } catch (error) {
    progress.finish();
    throw controller.signal.aborted ? controller.signal.reason : error;
  } finally {
    process.removeListener("SIGINT", interrupt);
  }
}

interface RunningModel {
  name: string;
  size?: number;
  size_vram?: number;
  expires_at?: string;
  context_length?: number;
}

/** `modelhost ps`: the models the running server has loaded (its `/api/ps`). */
export async function psCommand(args: string[], config: Config): Promise<string> {
  const usage = "modelhost ps [--json] [--host H] [--port P]";
  const { values, positionals } = parseCommandArgs(args, usage);
  if (positionals.length > 0) throw new UsageError(`Unexpected argument "${positionals[0]}".\n\nUsage: ${usage}`);
  const { models } = await new ServerClient(serverUrl(config)).get<{ models: RunningModel[] }>("/api/ps");
  return formatListing(models, values.json, ["NAME", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"], (model) => [
    model.name,
    model.size === undefined ? "-" : formatBytes(model.size),
    model.size_vram ? `${Math.round((model.size_vram / (model.size ?? model.size_vram)) * 100)}% GPU` : "100% CPU",
    model.context_length?.toString() ?? "-",
    until(model.expires_at),
  ]);
}

function until(expiresAt: string | undefined): string {
  if (!expiresAt) return "-";
  const ms = Date.parse(expiresAt) - Date.now();
  // Ollama reports "never" as a date centuries away.
  if (!Number.isFinite(ms) || ms > 100 * 365 * 86_400_000) return "forever";
  if (ms <= 0) return "now";
  const minutes = Math.round(ms / 60_000);
  return minutes < 1
    ? `${Math.ceil(ms / 1000)} seconds from now`
    : minutes < 120
      ? `${minutes} minutes from now`
      : `${Math.round(minutes / 60)} hours from now`;
}

async function partialDownloads(directory: string): Promise<{ count: number; bytes: number }> {
  let names: string[];
  try {
    names = (await readdir(directory)).filter((name) => name.startsWith(".") && name.endsWith(".partial"));
  } catch {
    return { count: 0, bytes: 0 };
  }
  const sizes = await Promise.all(
    names.map((name) =>
      stat(path.join(directory, name)).then(
        (stats) => stats.size,
        () => 0,
      ),
    ),
  );
  return { count: names.length, bytes: sizes.reduce((sum, size) => sum + size, 0) };
}

/** A name given on the command line, refused (with the grammar) unless it is a valid model name. */
function validName(name: string, usage: string): string {
  const problem = modelNameProblem(name);
  if (problem !== undefined)
    throw new UsageError(`${JSON.stringify(name.slice(0, 200))} is not a model name: ${problem}.\n\nUsage: ${usage}`);
  return name;
}

function notInstalled(name: string, config: Config): UsageError {
  return new UsageError(
    `No model "${name}" in ${config.modelsDir}. \`modelhost list\` shows the installed ones; \`modelhost pull REF\` adds one.`,
  );
}
