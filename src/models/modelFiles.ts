import path from "node:path";
import { isValidModelName, isWindowsDeviceName, MAX_NAME_PART_LENGTH } from "../core/modelName.js";

/** A split GGUF's part: `name-00001-of-00003.gguf` (llama.cpp's naming). */
export const splitPartPattern = /-(\d{5})-of-(\d{5})\.gguf$/i;

/** The part number and part count of a split file, or undefined for a whole file. */
export function splitPartOf(file: string): { part: number; count: number } | undefined {
  const match = splitPartPattern.exec(file);
  return match ? { part: Number(match[1]), count: Number(match[2]) } : undefined;
}

/** Every file of a model: the file itself, or all parts of a split one given any of its parts. */
export function modelFileParts(file: string): string[] {
  const split = splitPartOf(file);
  if (!split) return [file];
  const width = 5;
  return Array.from({ length: split.count }, (_, index) =>
    file.replace(splitPartPattern, `-${String(index + 1).padStart(width, "0")}-of-${String(split.count).padStart(width, "0")}.gguf`),
  );
}

/**
 * `Llama-3.2-1B-Instruct-Q4_K_M.gguf` → `Llama-3.2-1B-Instruct-Q4_K_M`; split parts lose their
 * suffix. A file name that is not a valid model name (`my model (1).gguf`, `con.gguf`) still lists,
 * under a name that is: other characters become `-` (`my-model-1`), and a Windows device name gets
 * `model-` (`model-con`), so every listed model can be named in a request, copied and deleted.
 */
export function defaultModelId(file: string): string {
  const stem = path
    .basename(file)
    .replace(splitPartPattern, "")
    .replace(/\.gguf$/i, "");
  if (isValidModelName(stem)) return stem;
  let id = stem
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/\.{2,}/g, ".")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, MAX_NAME_PART_LENGTH - "model-".length)
    .replace(/[.-]+$/, "");
  if (!isValidModelName(id)) id = id === "" ? "model" : `model-${id}`;
  return id;
}

/**
 * Whether `name` is a plain file name in the models directory that a model may be: no directory
 * part (`/`, `\\`), not `.`, `..` or hidden, no control character, no Windows device name (`con.gguf`), at most 255 characters. The
 * manifest's `file` and a pulled file's name must be one, so that no file operation leaves the
 * directory.
 */
export function isPlainFileName(name: string): boolean {
  // eslint-disable-next-line no-control-regex
  const separatorOrControl = /[/\\\u0000-\u001f\u007f]/;
  return name.length > 0 && name.length <= 255 && !separatorOrControl.test(name) && !name.startsWith(".") && !isWindowsDeviceName(name);
}

/** Whether the registry lists this directory entry as a model: `.gguf`, and a split model once, by its first part. */
export function isListedModelFile(name: string): boolean {
  if (!name.toLowerCase().endsWith(".gguf") || name.startsWith(".")) return false;
  const split = splitPartOf(name);
  return !split || split.part === 1;
}
