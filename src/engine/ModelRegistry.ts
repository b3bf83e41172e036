import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { GgufFileType } from "node-llama-cpp";
import { chatFormatOf } from "../chatTemplates/chatFormats.js";
import { templatePrintsTools } from "../chatTemplates/templateCapabilities.js";
import type { ModelAdapter, ModelDescription, ModelInfo } from "../core/ModelInfo.js";
import { nameCandidates } from "../core/modelName.js";
import type { GgufMetadataValue } from "../gguf/GgufReader.js";
import { ServerError } from "../core/ServerError.js";
import { checkModelFile } from "../models/checkModelFile.js";
import { defaultModelId, isListedModelFile } from "../models/modelFiles.js";
import { adapterName, entryId, MANIFEST_FILE, readManifest, type ManifestAdapter, type ManifestEntry } from "../models/modelsManifest.js";

type Metadata = Omit<ModelInfo, "id" | "aliases" | "path" | "projector" | "adapters" | "appliedAdapters">;

/**
 * What a GGUF file in the folder is: a model, a vision projector (an mmproj file) that a model
 * reads images through, or an adapter (general.type "adapter": a LoRA's low-rank matrices) that
 * applies over a model of its architecture.
 */
type FileKind =
  | { kind: "model"; metadata: Metadata }
  | { kind: "projector"; embeddingLength: number | undefined }
  | { kind: "adapter"; architecture: string; adapterType: string };

interface CachedMetadata {
  key: string;
  metadata: FileKind | Error;
}

export interface RegistryLogger {
  warn(message: string): void;
}

/**
 * The models installed in one directory. Listing reads each file's GGUF header (architecture,
 * context length, chat template…) without loading weights, caches it by size and modification
 * time, and sees files added or removed while the server runs.
 */
export class ModelRegistry {
  readonly directory: string;
  readonly #logger: RegistryLogger;
  readonly #metadata = new Map<string, CachedMetadata>();
  readonly #maxAgeMs: number;
  #snapshot: { at: number; models: ModelInfo[]; byName: Map<string, ModelInfo> } | undefined;
  #scanning: Promise<ModelInfo[]> | undefined;
  #lastManifestWarning = "";
  #stopped = false;

  constructor(directory: string, options: { logger?: RegistryLogger; maxAgeMs?: number } = {}) {
    this.directory = directory;
    this.#logger = options.logger ?? { warn: () => {} };
    this.#maxAgeMs = options.maxAgeMs ?? 1000;
  }

  /** Every model, freshly scanned; aliases are reported on their model. */
  async list(): Promise<ModelInfo[]> {
    return this.#scan();
  }

  /**
   * Resolves an id or alias, `x` and `x:latest` alike. Uses the last scan when it is recent, and
   * scans again before answering "not found", so a file copied in a moment ago is found.
   */
  async find(name: string): Promise<ModelInfo | undefined> {
    const lookUp = (byName: Map<string, ModelInfo> | undefined) =>
      nameCandidates(name)
        .map((candidate) => byName?.get(candidate))
        .find((model) => model !== undefined);
    const snapshot = this.#snapshot;
    if (snapshot && Date.now() - snapshot.at < this.#maxAgeMs) {
      const hit = lookUp(snapshot.byName);
      if (hit) return hit;
    }
    await this.#scan();
    return lookUp(this.#snapshot?.byName);
  }

  /** A model's full GGUF metadata and chat template (read afresh: this is for occasional inspection). */
  async describe(name: string): Promise<ModelDescription | undefined> {
    const info = await this.find(name);
    if (!info) return undefined;
    const { metadata } = await checkModelFile(info.path);
    const flat = describedMetadata(metadata);
    const template = flat["tokenizer.chat_template"];
    const features = info.templateFeatures ?? [];
    return {
      info,
      metadata: flat,
      ...(typeof template === "string" ? { chatTemplate: template } : {}),
      thinks: features.includes("thinking"),
      tools: features.includes("tools"),
    };
  }

  /**
   * Ends the scan under way, and any later one, at the next file: a scan of a large folder of
   * files to check (640 refused ones take seconds) must not hold a shutting-down server past its
   * grace period. What asked for it gets engine_unavailable.
   */
  stop(): void {
    this.#stopped = true;
  }

  #scan(): Promise<ModelInfo[]> {
    // Concurrent callers share one scan of the directory.
    this.#scanning ??= this.#doScan().finally(() => {
      this.#scanning = undefined;
    });
    return this.#scanning;
  }

  async #doScan(): Promise<ModelInfo[]> {
    const files = await this.#ggufFiles();
    const manifest = await this.#readManifest();
    const named = new Map<string, { id: string; aliases: string[]; projector?: string; adapters: ModelAdapter[]; draft?: string }>();
    for (const entry of manifest) {
      named.set(path.resolve(this.directory, entry.file), {
        id: entryId(entry),
        aliases: entry.aliases,
        ...(entry.draft === undefined ? {} : { draft: entry.draft }),
        ...(entry.projector === undefined ? {} : { projector: path.resolve(this.directory, entry.projector) }),
        adapters: entry.adapters.map((adapter: ManifestAdapter) => ({
          name: adapterName(adapter),
          path: path.resolve(this.directory, adapter.file),
          scale: adapter.scale ?? 1,
          ...(adapter.problem === undefined ? {} : { problem: adapter.problem }),
        })),
      });
    }

    const kinds = new Map<string, FileKind>();
    const declaredAdapters = [...named.values()].flatMap(({ adapters }) =>
      adapters.flatMap((adapter) => (adapter.problem === undefined ? [adapter.path] : [])),
    );
    const paths = [...new Set([...files, ...named.keys(), ...declaredAdapters])].sort();
    for (const file of paths) {
      if (this.#stopped) throw new ServerError("engine_unavailable", { message: "The server is shutting down." });
      const kind = await this.#kindOf(file);
      if (kind) kinds.set(file, kind);
    }
    const projectors = new Map<string, number | undefined>();
    for (const [file, kind] of kinds) if (kind.kind === "projector") projectors.set(file, kind.embeddingLength);

    const models: ModelInfo[] = [];
    const byName = new Map<string, ModelInfo>();
    for (const [file, kind] of kinds) {
      if (kind.kind !== "model") continue;
      const { metadata } = kind;
      const names = named.get(file) ?? { id: defaultModelId(file), aliases: [], adapters: [] };
      const projector = metadata.capabilities.includes("chat") ? this.#projectorOf(file, names.projector, metadata, projectors) : undefined;
      const adapters = metadata.capabilities.includes("chat") ? this.#adaptersOf(file, names.adapters, metadata, kinds) : [];
      const model: ModelInfo = {
        id: names.id,
        aliases: names.aliases,
        path: file,
        ...metadata,
        ...(projector === undefined ? {} : { projector }),
        ...(adapters.length > 0 ? { adapters } : {}),
        ...(names.draft !== undefined && metadata.capabilities.includes("chat") ? { draft: names.draft } : {}),
      };
      if (byName.has(model.id)) {
        this.#logger.warn(`Two models are named "${model.id}"; ${file} is ignored. Give it another id in ${MANIFEST_FILE}.`);
        continue;
      }
      // Each adapter is a model of its own, `base+name`: the base's file and weights, chat only
      // (an embedding context runs without adapters), with that adapter applied.
      const adapted = adapters.flatMap((adapter, id): ModelInfo[] =>
        adapter.problem === undefined
          ? [
              {
                ...model,
                id: `${model.id}+${adapter.name}`,
                aliases: model.aliases.map((alias) => `${alias}+${adapter.name}`),
                capabilities: ["chat"],
                appliedAdapters: [{ id, scale: adapter.scale }],
              },
            ]
          : [],
      );
      for (const each of [model, ...adapted]) {
        models.push(each);
        for (const name of [each.id, ...each.aliases]) if (!byName.has(name)) byName.set(name, each);
      }
    }
    this.#snapshot = { at: Date.now(), models, byName };
    return models;
  }

  async #ggufFiles(): Promise<string[]> {
    let entries: string[];
    try {
      entries = await readdir(this.directory);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
    // Split models are listed by their first part (llama.cpp finds the others next to it);
    // dot-prefixed files are downloads in progress.
    return entries.filter(isListedModelFile).map((name) => path.join(this.directory, name));
  }

  async #readManifest(): Promise<ManifestEntry[]> {
    const { entries, problem, warnings } = await readManifest(this.directory);
    // A broken manifest must not take the server down: warn (once per change) and list files by
    // name; entries it skips, or names it ignores, are warned of the same way.
    const said = problem === undefined ? (warnings ?? []) : [`Ignoring ${path.join(this.directory, MANIFEST_FILE)}: ${problem}`];
    const text = said.join("\n");
    if (text !== this.#lastManifestWarning) for (const warning of said) this.#logger.warn(warning);
    this.#lastManifestWarning = text;
    return entries;
  }

  /**
   * The projector a chat model reads images through: the one its manifest entry names, or else the
   * one found beside it by name (see projectorMatch) whose output is the width of the model's
   * embeddings (llama.cpp refuses a pair whose widths differ).
   */
  #projectorOf(
    file: string,
    declared: string | undefined,
    metadata: Metadata,
    projectors: ReadonlyMap<string, number | undefined>,
  ): string | undefined {
    if (declared !== undefined) {
      if (projectors.has(declared)) return declared;
      this.#logger.warn(
        `${MANIFEST_FILE} pairs ${file} with ${declared}, which is not a readable vision projector here; it is served without one.`,
      );
      return undefined;
    }
    let best: { file: string; length: number } | undefined;
    for (const [projector, width] of projectors) {
      if (width !== undefined && metadata.embeddingLength !== undefined && width !== metadata.embeddingLength) continue;
      const length = projectorMatch(path.basename(file), path.basename(projector));
      if (length > (best?.length ?? 0)) best = { file: projector, length };
    }
    return best?.file;
  }

  /**
   * The adapters a model's manifest entry declares, in its order (a request's `lora` ids index
   * them, so one that cannot apply keeps its place, with the reason it says when used): readable
   * LoRA adapters of its architecture apply. llama.cpp's own check of each matrix's shape against
   * the model's is made when one first loads (LoraAdapters).
   */
  #adaptersOf(file: string, declared: ModelAdapter[], metadata: Metadata, kinds: ReadonlyMap<string, FileKind>): ModelAdapter[] {
    const names = new Set<string>();
    return declared.map((adapter) => {
      if (adapter.problem !== undefined) return adapter;
      const kind = kinds.get(adapter.path);
      const unreadable = this.#metadata.get(adapter.path)?.metadata;
      const problem =
        kind?.kind !== "adapter"
          ? unreadable instanceof Error
            ? `it is not a readable GGUF file (${unreadable.message})`
            : kind === undefined
              ? "the file is not in the models directory"
              : `it is a ${kind.kind}, not an adapter`
          : kind.adapterType !== "lora"
            ? `it is an adapter of type "${kind.adapterType}", and only LoRA adapters apply`
            : kind.architecture !== metadata.architecture
              ? `it was made for the ${kind.architecture} architecture, and the model is ${metadata.architecture}`
              : names.has(adapter.name)
                ? `another adapter of the model is named "${adapter.name}"`
                : undefined;
      names.add(adapter.name);
      if (problem === undefined) return adapter;
      this.#logger.warn(`${MANIFEST_FILE} gives ${file} the adapter ${adapter.path}, which cannot apply: ${problem}.`);
      return { ...adapter, problem };
    });
  }

  async #kindOf(file: string): Promise<FileKind | undefined> {
    let stats;
    try {
      stats = await stat(file);
    } catch {
      return undefined; // removed, or named in the manifest but absent
    }
    const key = `${stats.size}:${stats.mtimeMs}`;
    const cached = this.#metadata.get(file);
    if (cached?.key === key) return cached.metadata instanceof Error ? undefined : cached.metadata;

    let metadata: FileKind | Error;
    try {
      metadata = await readKind(file, stats.size, stats.mtimeMs);
    } catch (error) {
      metadata = error instanceof Error ? error : new Error(String(error));
      this.#logger.warn(`Skipping ${file}: not a readable GGUF model (${metadata.message})`);
    }
    this.#metadata.set(file, { key, metadata });
    return metadata instanceof Error ? undefined : metadata;
  }
}

/**
 * What listing needs from a file's header, read by our own bounded reader (src/gguf/GgufReader.ts;
 * each part of a split model): a file it refuses is not listed, so never handed to llama.cpp, nor
 * to node-llama-cpp's reader, which trusts the counts (an 88-byte file claiming 2^40 tensors made
 * it allocate without end, blocking the server).
 */
async function readKind(file: string, sizeBytes: number, mtimeMs: number): Promise<FileKind> {
  const header = await checkModelFile(file);
  const value = (key: string) => header.metadata.get(key);
  if (value("general.type") === "adapter") {
    return {
      kind: "adapter",
      architecture: String(value("general.architecture") ?? "unknown"),
      adapterType: String(value("adapter.type") ?? ""),
    };
  }
  // llama.cpp's converters write projectors as architecture "clip"; its loader reads the flag.
  if (value("general.architecture") === "clip" || value("clip.has_vision_encoder") !== undefined) {
    return { kind: "projector", embeddingLength: numberOrUndefined(value("clip.vision.projection_dim")) };
  }
  return { kind: "model", metadata: readMetadata(header.metadata, header.parameterCount, sizeBytes, mtimeMs) };
}

function readMetadata(
  header: ReadonlyMap<string, GgufMetadataValue>,
  parameterCount: number,
  sizeBytes: number,
  mtimeMs: number,
): Metadata {
  const value = (key: string) => header.get(key);
  const fileType = numberOrUndefined(value("general.file_type"));
  const architecture = String(value("general.architecture") ?? "unknown");
  const ofArchitecture = (key: string) => value(`${architecture}.${key}`);
  const causal = ofArchitecture("attention.causal");
  const poolingType = numberOrUndefined(ofArchitecture("pooling_type"));
  const capabilities = capabilitiesOf(architecture, typeof causal === "boolean" ? causal : undefined, poolingType);
  return {
    sizeBytes,
    created: Math.floor(mtimeMs / 1000),
    architecture,
    contextLength: numberOrUndefined(ofArchitecture("context_length")),
    embeddingLength: numberOrUndefined(ofArchitecture("embedding_length")),
    parameterCount: parameterCount || undefined,
    hasChatTemplate: typeof value("tokenizer.chat_template") === "string",
    quantization: fileType === undefined ? undefined : fileTypeName(fileType),
    // The current key names, and the older ones llama.cpp still reads.
    fillInTheMiddle:
      ["pre", "suf", "mid"].every((part) => value(`tokenizer.ggml.fim_${part}_token_id`) !== undefined) ||
      ["prefix", "suffix", "middle"].every((part) => value(`tokenizer.ggml.${part}_token_id`) !== undefined),
    capabilities,
    ...(capabilities.includes("chat")
      ? { templateFeatures: templateFeaturesOf(value("tokenizer.chat_template"), value("tokenizer.chat_template.tool_use")) }
      : {}),
    poolingType,
  };
}

/**
 * What a chat model's templates give it (ModelInfo.templateFeatures): read once per file, with
 * its listing (parsing the template and rendering a probe with it: a few milliseconds).
 */
function templateFeaturesOf(template: unknown, toolUse: unknown): ReadonlyArray<"tools" | "thinking"> {
  // Without a template, node-llama-cpp's fallback format describes the tools in the system prompt.
  if (typeof template !== "string") return ["tools"];
  const sources = typeof toolUse === "string" ? [template, toolUse] : [template];
  return [
    ...(templatePrintsTools(sources) ? (["tools"] as const) : []),
    ...(chatFormatOf(template).thought !== undefined ? (["thinking"] as const) : []),
  ];
}

/**
 * How well a projector's file name names a model's: the length of the model's name that the
 * projector's, without its `mmproj` prefix and its precision suffix, begins (case aside), or 0.
 * `mmproj-gemma-3-4b-it-f16.gguf` pairs with `gemma-3-4b-it-Q4_K_M.gguf`; llama.cpp's converter
 * and the Hugging Face repositories name them so.
 */
export function projectorMatch(model: string, projector: string): number {
  const stem = (name: string) => name.replace(/\.gguf$/i, "").toLowerCase();
  const core = stem(projector)
    .replace(/^mmproj[-_.]?/, "")
    .replace(/[-_.](f16|f32|bf16|q8_0|q6_k|q5_k_m|q4_k_m|q4_0)$/, "");
  if (core.length < 3) return 0;
  return stem(model).startsWith(core) ? core.length : 0;
}

/** llama.cpp's LLAMA_POOLING_TYPE_RANK: the file is a reranker (a cross-encoder with a classification head). */
const RANK_POOLING = 4;

function capabilitiesOf(architecture: string, causal: boolean | undefined, poolingType: number | undefined): ModelInfo["capabilities"] {
  // A reranker's output is one relevance score per input, not a vector nor a next token.
  if (poolingType === RANK_POOLING) return ["rerank"];
  return isEncoder(architecture, causal) ? ["embeddings"] : ["chat", "embeddings"];
}

/** The vocabulary: most of a header's size, and of no use to listing or describing a model. */
const VOCABULARY_KEYS = ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"];

/** llama.cpp's name of a file type: `MOSTLY_Q4_K_M` (15) → `Q4_K_M`, `ALL_F32` → `F32`. */
function fileTypeName(fileType: number): string | undefined {
  const name = (GgufFileType as unknown as Record<number, string | undefined>)[fileType];
  return name?.replace(/^(MOSTLY|ALL)_/, "");
}

/** The metadata `describe` reports: by GGUF's dotted keys, u64 values as numbers, without the vocabulary. */
function describedMetadata(metadata: ReadonlyMap<string, GgufMetadataValue>): Record<string, unknown> {
  const described: Record<string, unknown> = {};
  for (const [key, value] of metadata) {
    if (VOCABULARY_KEYS.includes(key)) continue;
    described[key] = Array.isArray(value) ? value.map(asNumber) : asNumber(value as GgufMetadataValue);
  }
  return described;
}

function asNumber<T>(value: T): T | number {
  return typeof value === "bigint" ? Number(value) : value;
}

/** Encoder architectures (BERT and kin) attend both ways: they embed, but cannot generate text. */
const encoderArchitectures = new Set([
  "bert",
  "nomic-bert",
  "nomic-bert-moe",
  "jina-bert-v2",
  "jina-bert-v3",
  "modern-bert",
  "neo-bert",
  "eurobert",
  "t5encoder",
]);

function isEncoder(architecture: string, causal: boolean | undefined): boolean {
  return causal === false || encoderArchitectures.has(architecture);
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === "number" || typeof value === "bigint" ? Number(value) : undefined;
}
