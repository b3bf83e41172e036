// The image files under the ingested folders, for the view_image tool. A name from the model is
// only ever compared with the files listed there, never joined into a path, so `../` or an
// absolute path elsewhere leads nowhere. The format comes from the file's first bytes, not its
// extension: a `.png` that is no image is refused here, as a tool error the model can read,
// instead of by the service, which would refuse the whole request and end the answer.
import fs from "node:fs/promises";
import path from "node:path";
import { listFiles } from "./files.js";

export const IMAGE_EXTENSIONS: ReadonlySet<string> = new Set([".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"]);

/**
 * Largest image the tool returns. It travels base64-encoded (a third larger) in every later request
 * of the answer, which must fit the service's body limit (modelhost's default: 10 MB).
 */
export const MAX_IMAGE_BYTES = 4 * 1024 * 1024;

/** Names listed in an error, at most: enough for the model to pick one, short enough for its context. */
const LISTED = 20;

export interface ImageFile {
  /** Absolute path. */
  file: string;
  /** Relative to its ingested folder, with `/` separators: what the model names it by. */
  name: string;
}

/** Each image once, named within the first folder that holds it (a folder may be inside another). */
export async function listImages(folders: readonly string[]): Promise<ImageFile[]> {
  const images = new Map<string, ImageFile>();
  for (const folder of folders) {
    // A folder ingested once and deleted since has no images left to show.
    const files = await listFiles(folder, IMAGE_EXTENSIONS).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return [];
      throw error;
    });
    for (const file of files) {
      if (!images.has(file)) images.set(file, { file, name: path.relative(folder, file).split(path.sep).join("/") });
    }
  }
  return [...images.values()];
}

/**
 * The image a name stands for: its absolute path, or its name within its folder, or that name
 * ignoring case, or its file name alone ignoring case, the first of these that one image matches.
 * Throws, with the names to choose from, when none does or several do.
 */
export async function findImage(folders: readonly string[], name: string): Promise<ImageFile> {
  const images = await listImages(folders);
  if (images.length === 0) throw new Error("There are no image files in the ingested folders.");
  const wanted = name.trim().replaceAll("\\", "/");
  const lower = wanted.toLowerCase();
  const rules = [
    (image: ImageFile) => image.file === wanted,
    (image: ImageFile) => image.name === wanted,
    (image: ImageFile) => image.name.toLowerCase() === lower,
    (image: ImageFile) => path.posix.basename(image.name).toLowerCase() === path.posix.basename(lower),
  ];
  for (const rule of rules) {
    const matches = images.filter(rule);
    if (matches.length === 1) return matches[0]!;
    if (matches.length > 1) throw new Error(`Several images are named "${name}": ${names(matches)}. Give one of these names.`);
  }
  throw new Error(`There is no image named "${name}". The images are: ${names(images)}.`);
}

function names(images: ImageFile[]): string {
  const listed = images.slice(0, LISTED).map((image) => image.name);
  return images.length > LISTED ? `${listed.join(", ")} and ${images.length - LISTED} more` : listed.join(", ");
}

/** An image file's bytes and media type, or an error saying why it cannot be shown. */
export async function readImage(image: ImageFile): Promise<{ mediaType: string; bytes: Buffer }> {
  const { size } = await fs.stat(image.file);
  if (size > MAX_IMAGE_BYTES) {
    throw new Error(`${image.name} is ${megabytes(size)}; images of at most ${megabytes(MAX_IMAGE_BYTES)} can be shown.`);
  }
  const bytes = await fs.readFile(image.file);
  const mediaType = mediaTypeOf(bytes);
  if (!mediaType) throw new Error(`${image.name} is not a PNG, JPEG, GIF, WebP or BMP image.`);
  return { mediaType, bytes };
}

/** The format by its signature, as the service itself decides it. */
export function mediaTypeOf(bytes: Uint8Array): string | undefined {
  const ascii = (at: number, length: number) => String.fromCharCode(...bytes.subarray(at, at + length));
  if ([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((byte, i) => bytes[i] === byte)) return "image/png";
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "image/jpeg";
  if (ascii(0, 6) === "GIF87a" || ascii(0, 6) === "GIF89a") return "image/gif";
  if (ascii(0, 4) === "RIFF" && ascii(8, 4) === "WEBP") return "image/webp";
  if (ascii(0, 2) === "BM") return "image/bmp";
  return undefined;
}

const megabytes = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
