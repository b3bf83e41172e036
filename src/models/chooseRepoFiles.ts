import path from "node:path";
import { ServerError } from "../core/ServerError.js";
import { splitPartOf, splitPartPattern } from "./modelFiles.js";

/** A file of a hub repository, as its file-list API describes it. */
export interface RepoFile {
  /** Path inside the repository, e.g. `Qwen2.5-0.5B-Instruct-Q4_K_M.gguf` or `Q8_0/model-00001-of-00002.gguf`. */
  path: string;
  size: number;
  /** SHA-256 (hex) of an LFS file's content, as the hub publishes it. */
  sha256?: string;
}

/** One model in a repository: a single file, or every part of a split one, in order. */
interface Candidate {
  quant: string;
  parts: RepoFile[];
}

/**
 * Ollama picks Q4_K_M when no quantization is named; where a repository lacks it, these are the
 * next best trade-offs of size and quality, before falling back to the first file listed.
 */
const defaultQuants = ["Q4_K_M", "Q4_K_S", "Q4_0", "Q5_K_M", "Q8_0"];

/** The quantization at the end of a file name: `…-Q4_K_M`, `….IQ3_XS`, `…-UD-Q4_K_XL`, `…-BF16`. */
const quantPattern = /(?:^|[-._])((?:UD-)?(?:[IT]?Q\d[A-Z0-9_]*|BF16|F16|F32|FP16|FP32|MXFP4[A-Z0-9_]*))$/i;

/**
 * Which files of a repository a reference means: the named file (with its other parts, if split),
 * or the model in the named quantization, or a sensible default. An unknown file or quantization is
 * a `model_not_found` that lists what the repository offers.
 */
export function chooseRepoFiles(repo: string, files: RepoFile[], wanted: { file?: string; quant?: string }): RepoFile[] {
  const candidates = candidatesOf(files);
  const available = () => describeAvailable(repo, candidates);
  if (candidates.length === 0) {
    throw new ServerError("model_not_found", { model: repo, message: `The repository ${repo} has no GGUF model files.` });
  }
  if (wanted.file !== undefined) {
    const name = wanted.file.toLowerCase();
    const hit = candidates.find((candidate) =>
      candidate.parts.some(
        (part) => part.path.toLowerCase() === name || (!name.includes("/") && path.posix.basename(part.path).toLowerCase() === name),
      ),
    );
    if (!hit)
      throw new ServerError("model_not_found", {
        model: repo,
        message: `The repository ${repo} has no file "${wanted.file}". ${available()}`,
      });
    return hit.parts;
  }
  if (wanted.quant !== undefined) {
    const tag = wanted.quant.toLowerCase();
    const hits = candidates.filter((candidate) => {
      const stem = stemOf(candidate.parts[0]!.path).toLowerCase();
      return candidate.quant.toLowerCase() === tag || stem === tag || stem.endsWith(`-${tag}`) || stem.endsWith(`.${tag}`);
    });
    if (hits.length === 0) {
      throw new ServerError("model_not_found", {
        model: repo,
        message: `The repository ${repo} has no file in quantization "${wanted.quant}". ${available()}`,
      });
    }
    if (hits.length > 1) {
      const names = hits.map((hit) => hit.parts[0]!.path).join(", ");
      throw new ServerError("invalid_request", {
        param: "model",
        message: `Several files of ${repo} are in quantization "${wanted.quant}": ${names}. Name one: hf.co/${repo}/FILE.gguf.`,
      });
    }
    return hits[0]!.parts;
  }
  for (const quant of defaultQuants) {
    const hit = candidates.find((candidate) => candidate.quant === quant);
    if (hit) return hit.parts;
  }
  return candidates[0]!.parts;
}

/** A repository's vision projectors (`mmproj*.gguf`), as llama.cpp's converter and the hub name them. */
const projectorPattern = /^mmproj.*\.gguf$/i;

/** Projector precisions, best first: llama.cpp's converter writes F16 by default, and it is the one its docs and ggml-org's repositories use. */
const projectorPrecisions = ["F16", "BF16", "Q8_0", "F32"];

/**
 * The vision projector to fetch with `model` (its files), as `llama-server -hf` and Ollama fetch
 * one: of the repository's `mmproj*.gguf` files, those beside the model (its folder) if any, in
 * the first precision of projectorPrecisions it has, else the first listed. None: a text model.
 */
export function chooseProjector(files: readonly RepoFile[], model: readonly RepoFile[]): RepoFile | undefined {
  const projectors = files.filter((file) => projectorPattern.test(path.posix.basename(file.path)));
  const folder = path.posix.dirname(model[0]!.path);
  const beside = projectors.filter((file) => path.posix.dirname(file.path) === folder);
  const candidates = beside.length > 0 ? beside : projectors;
  const precision = (file: RepoFile) => quantPattern.exec(stemOf(file.path))?.[1]?.toUpperCase();
  for (const wanted of projectorPrecisions) {
    const hit = candidates.find((file) => precision(file) === wanted);
    if (hit) return hit;
  }
  return candidates[0];
}

/** Groups GGUF files into models (split parts together); vision projectors are not models. */
function candidatesOf(files: RepoFile[]): Candidate[] {
  const groups = new Map<string, RepoFile[]>();
  for (const file of [...files].sort((a, b) => a.path.localeCompare(b.path))) {
    const base = path.posix.basename(file.path);
    if (!/\.gguf$/i.test(base) || projectorPattern.test(base)) continue;
    const key = file.path.replace(splitPartPattern, "");
    groups.set(key, [...(groups.get(key) ?? []), file]);
  }
  const candidates: Candidate[] = [];
  for (const parts of groups.values()) {
    const split = splitPartOf(parts[0]!.path);
    // A split model is offered only when every part is there; llama.cpp needs them all.
    if (split && (split.part !== 1 || parts.length !== split.count)) continue;
    const stem = stemOf(parts[0]!.path);
    candidates.push({ quant: quantPattern.exec(stem)?.[1]?.toUpperCase() ?? stem, parts });
  }
  return candidates;
}

function stemOf(file: string): string {
  return path.posix
    .basename(file)
    .replace(splitPartPattern, "")
    .replace(/\.gguf$/i, "");
}

function describeAvailable(repo: string, candidates: Candidate[]): string {
  const quants = [...new Set(candidates.map((candidate) => candidate.quant))];
  return `Available: ${quants.join(", ")} (e.g. hf.co/${repo}:${quants.includes("Q4_K_M") ? "Q4_K_M" : quants[0]}).`;
}
