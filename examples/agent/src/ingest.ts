// `ingest DIR`: text and Markdown files into the store. A file whose content hash is unchanged is
// skipped, a changed one has its chunks replaced, and a file gone from DIR has its chunks removed.
// DIR itself is recorded too: the image files under it are what view_image shows. They are not
// embedded (a text embedding model cannot read them); the tool reads them when the model asks.
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type OpenAI from "openai";
import { chunkText, DEFAULT_CHUNKING, type ChunkOptions } from "./chunking.js";
import { listFiles } from "./files.js";
import { IMAGE_EXTENSIONS } from "./images.js";
import { embed } from "./retrieval.js";
import type { ChunkStore } from "./store.js";

const EXTENSIONS = new Set([".md", ".markdown", ".txt", ".text"]);
/** Chunks per embeddings request: one request per batch, small enough for any service's limits. */
export const EMBEDDING_BATCH = 64;

export interface IngestReport {
  added: string[];
  changed: string[];
  unchanged: string[];
  removed: string[];
  /** The image files under the folder, which view_image can show. */
  images: string[];
  chunks: number;
  requests: number;
}

export interface IngestOptions {
  client: OpenAI;
  store: ChunkStore;
  embeddingModel: string;
  chunking?: ChunkOptions;
  /** Called after each embeddings batch (the CLI draws its progress bar from it). */
  onProgress?: (done: number, total: number) => void;
}

export async function ingest(directory: string, options: IngestOptions): Promise<IngestReport> {
  const root = path.resolve(directory);
  const files = await listFiles(root, EXTENSIONS);
  const stored = options.store.fileHashes();
  const report: IngestReport = { added: [], changed: [], unchanged: [], removed: [], images: [], chunks: 0, requests: 0 };

  const pending: { source: string; hash: string; chunks: string[] }[] = [];
  for (const source of files) {
    const text = await fs.readFile(source, "utf8");
    const hash = createHash("sha256").update(text).digest("hex");
    const previous = stored.get(source);
    if (previous === hash) {
      report.unchanged.push(source);
      continue;
    }
    (previous === undefined ? report.added : report.changed).push(source);
    pending.push({ source, hash, chunks: chunkText(text, options.chunking ?? DEFAULT_CHUNKING) });
  }

  // Batches run across file borders, so a folder of small files still makes few requests.
  const texts = pending.flatMap((file) => file.chunks);
  const vectors: Float32Array[] = [];
  for (let start = 0; start < texts.length; start += EMBEDDING_BATCH) {
    vectors.push(...(await embed(options.client, options.embeddingModel, texts.slice(start, start + EMBEDDING_BATCH))));
    report.requests++;
    options.onProgress?.(vectors.length, texts.length);
  }

  let next = 0;
  for (const file of pending) {
    const chunks = file.chunks.map((text, position) => ({ text, position, vector: vectors[next++]! }));
    options.store.replaceFile(file.source, file.hash, chunks);
    report.chunks += chunks.length;
  }

  // Only files under this directory are this ingest's to remove; other folders stay.
  for (const source of stored.keys()) {
    if (source.startsWith(root + path.sep) && !files.includes(source)) {
      options.store.removeFile(source);
      report.removed.push(source);
    }
  }
  options.store.addFolder(root);
  report.images = await listFiles(root, IMAGE_EXTENSIONS);
  return report;
}
