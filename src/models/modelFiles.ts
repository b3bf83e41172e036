import path from "node:path";

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

/** `Llama-3.2-1B-Instruct-Q4_K_M.gguf` → `Llama-3.2-1B-Instruct-Q4_K_M`; split parts lose their suffix. */
export function defaultModelId(file: string): string {
  return path.basename(file).replace(splitPartPattern, "").replace(/\.gguf$/i, "");
}

/** Whether the registry lists this directory entry as a model: `.gguf`, and a split model once, by its first part. */
export function isListedModelFile(name: string): boolean {
  if (!name.toLowerCase().endsWith(".gguf") || name.startsWith(".")) return false;
  const split = splitPartOf(name);
  return !split || split.part === 1;
}
