import { stat } from "node:fs/promises";
import { Worker } from "node:worker_threads";

// Hashing runs in a worker thread: SHA-256 costs about 2 s of CPU per GB here, which would stall
// every stream for seconds if it ran on the event loop, even in small slices. The worker reads the
// file in 1 MiB chunks, so its memory stays small whatever the file's size.
const HASH_WORKER = `
const { createHash } = require("node:crypto");
const { createReadStream } = require("node:fs");
const { parentPort, workerData } = require("node:worker_threads");
const hash = createHash("sha256");
createReadStream(workerData, { highWaterMark: 1 << 20 })
  .on("data", (chunk) => hash.update(chunk))
  .on("error", (error) => parentPort.postMessage({ error: error.message }))
  .on("end", () => parentPort.postMessage({ digest: hash.digest("hex") }));
`;

function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(HASH_WORKER, { eval: true, workerData: file });
    worker.once("message", (message: { digest?: string; error?: string }) => {
      if (message.digest) resolve(message.digest);
      else reject(new Error(message.error ?? "hashing failed"));
      void worker.terminate();
    });
    worker.once("error", reject);
  });
}

/**
 * SHA-256 digests of model files, computed on first request and remembered by path, size and
 * modification time, so a file replaced in place is hashed again. Concurrent callers share one run.
 */
export class FileDigests {
  readonly #digests = new Map<string, { key: string; digest: Promise<string> }>();

  async of(file: string): Promise<string> {
    const stats = await stat(file);
    const key = `${stats.size}:${stats.mtimeMs}`;
    const known = this.#digests.get(file);
    if (known?.key === key) return known.digest;
    const digest = hashFile(file);
    this.#digests.set(file, { key, digest });
    // A failure (file removed mid-way) is not remembered: the next caller tries again.
    digest.catch(() => {
      if (this.#digests.get(file)?.digest === digest) this.#digests.delete(file);
    });
    return digest;
  }
}
