// The files under a folder with one of some extensions: ingest's documents and view_image's images.
import fs from "node:fs/promises";
import path from "node:path";

/** Absolute paths, sorted; extensions are lower case with the dot (".md"); node_modules is passed over. */
export async function listFiles(root: string, extensions: ReadonlySet<string>): Promise<string[]> {
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && extensions.has(path.extname(entry.name).toLowerCase()))
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter((file) => !file.split(path.sep).includes("node_modules"))
    .sort();
}
