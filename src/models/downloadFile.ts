import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rm, stat, truncate } from "node:fs/promises";
import { ServerError } from "../core/ServerError.js";

export interface DownloadRequest {
  url: string;
  /** Where the bytes go until they are complete and verified; what is there already is resumed. */
  partialPath: string;
  expectedSize?: number;
  /** SHA-256 (hex) the hub publishes; without it, an `X-Linked-Etag` header that carries one is used. */
  expectedSha256?: string;
  /** fetch with the hub's credentials added where they belong. */
  fetch: typeof fetch;
  signal?: AbortSignal;
  onProgress?: (completed: number, total: number | undefined) => void;
  /** Called before bytes are written, with how many more are coming; throws when they do not fit. */
  reserve?: (bytes: number) => Promise<void>;
  /** Attempts in a row that make no progress before giving up (default 5). */
  maxAttempts?: number;
  /** First pause between attempts, doubled each time (default 500 ms). */
  retryDelayMs?: number;
}

export interface DownloadResult {
  size: number;
  sha256: string;
}

const maxRedirects = 10;
/** Bytes received but not yet written that make the download wait for the disk (16 MiB). */
const maxBytesInFlight = 16 * 1024 * 1024;
const writeBatchBytes = 1024 * 1024;

/** A hub's SHA-256 in an ETag: `"<64 hex>"` (LFS files); a git blob's SHA-1 ETag is not one. */
function sha256OfEtag(etag: string | null): string | undefined {
  const match = /^(?:W\/)?"?([0-9a-f]{64})"?$/i.exec(etag?.trim() ?? "");
  return match?.[1]?.toLowerCase();
}

class RetryableError extends Error {}

/**
 * Downloads one file into `partialPath`, resuming from what is already there with an HTTP Range
 * request (after a dropped connection within this call, or a Ctrl-C before it), so no byte is
 * fetched twice. The SHA-256 covers the bytes on disk plus the new ones; a mismatch deletes the
 * partial file, since resuming it could never succeed. The caller renames the verified file into
 * place.
 */
export async function downloadFile(request: DownloadRequest): Promise<DownloadResult> {
  const state = { have: 0, hash: createHash("sha256"), total: request.expectedSize, sha256: request.expectedSha256?.toLowerCase() };
  state.have = await resumeFrom(request.partialPath, state.hash, request.expectedSize);

  const maxAttempts = request.maxAttempts ?? 5;
  let delay = request.retryDelayMs ?? 500;
  let failures = 0;
  while (state.total === undefined || state.have < state.total) {
    const before = state.have;
    try {
      await transfer(request, state);
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason ?? error;
      if (!(error instanceof RetryableError) && !isNetworkError(error)) throw error;
      // Progress resets the count: a flaky connection that keeps delivering is worth following.
      failures = state.have > before ? 1 : failures + 1;
      if (failures >= maxAttempts) {
        throw new ServerError("download_failed", {
          message: `Downloading ${displayUrl(request.url)} failed ${failures} times in a row (${(error as Error).message}). Pull again to resume.`,
          cause: error,
        });
      }
      await sleep(state.have > before ? 0 : delay, request.signal);
      if (state.have === before) delay *= 2;
    }
  }

  if (state.total !== undefined && state.have !== state.total) {
    await rm(request.partialPath, { force: true });
    throw new ServerError("download_failed", {
      message: `${displayUrl(request.url)} is ${state.have} bytes, not the ${state.total} announced.`,
    });
  }
  const sha256 = state.hash.digest("hex");
  if (state.sha256 !== undefined && sha256 !== state.sha256) {
    await rm(request.partialPath, { force: true });
    throw new ServerError("download_failed", {
      message: `The SHA-256 of ${displayUrl(request.url)} is ${sha256}, not the ${state.sha256} the server publishes: the download was corrupted and has been deleted. Pull again.`,
    });
  }
  return { size: state.have, sha256 };
}

/** Bytes already in the partial file, hashed (read locally, never fetched again). */
async function resumeFrom(partialPath: string, hash: Hash, expectedSize: number | undefined): Promise<number> {
  let size: number;
  try {
    size = (await stat(partialPath)).size;
  } catch {
    return 0;
  }
  if (expectedSize !== undefined && size > expectedSize) {
    await truncate(partialPath, 0);
    return 0;
  }
  for await (const chunk of createReadStream(partialPath, { end: size - 1 })) hash.update(chunk as Buffer);
  return size;
}

interface TransferState {
  have: number;
  hash: Hash;
  total: number | undefined;
  sha256: string | undefined;
}

/** One request, appending what it brings; on return the file is complete (`total` is known). */
async function transfer(request: DownloadRequest, state: TransferState): Promise<void> {
  const { response, linked } = await fetchFollowingRedirects(request, state.have > 0 ? { Range: `bytes=${state.have}-` } : {});
  state.sha256 ??= sha256OfEtag(linked.etag);
  state.total ??= linked.size;

  if (response.status === 416) {
    // Nothing left to send: the partial file is already whole (a crash came before the rename).
    const total = /^bytes \*\/(\d+)$/.exec(response.headers.get("content-range") ?? "")?.[1];
    await response.body?.cancel();
    state.total ??= total === undefined ? undefined : Number(total);
    if (state.total === state.have) return;
    // The file changed under us (or the server cannot resume): start over.
    const at = state.have;
    await restart(request.partialPath, state);
    throw new RetryableError(`the server refused to resume at byte ${at}`);
  }
  if (response.status >= 500 || response.status === 429) {
    await response.body?.cancel();
    throw new RetryableError(`HTTP ${response.status}`);
  }
  if (response.status !== 200 && response.status !== 206) {
    await response.body?.cancel();
    throw httpError(request.url, response.status);
  }
  const length = Number(response.headers.get("content-length") ?? NaN);
  if (response.status === 206) {
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(response.headers.get("content-range") ?? "");
    if (!range || Number(range[1]) !== state.have) {
      await response.body?.cancel();
      throw new ServerError("download_failed", { message: `${displayUrl(request.url)} answered a resumed download with the wrong range.` });
    }
    if (range[3] !== "*") state.total ??= Number(range[3]);
  } else {
    // 200: a whole file, either asked for or because the server ignores Range; start over.
    if (state.have > 0) await restart(request.partialPath, state);
    if (Number.isFinite(length)) state.total ??= length;
  }
  if (state.total !== undefined) await request.reserve?.(state.total - state.have);
  if (!response.body) throw new RetryableError("empty response");

  const file = await open(request.partialPath, "a");
  try {
    request.onProgress?.(state.have, state.total);
    // The loop reads on while the disk writes: when a connection breaks, fetch drops the chunks
    // still queued in the body stream, so keeping that queue empty means every byte that arrived
    // is kept, and none is fetched again. Past `maxBytesInFlight`, the disk sets the pace. Chunks
    // (16-64 KiB) are written in batches of `writeBatchBytes`: a write per chunk made the
    // download 4 times slower than curl.
    let writing: Promise<unknown> = Promise.resolve();
    let inFlight = 0;
    let batch: Uint8Array[] = [];
    let batchBytes = 0;
    const flush = () => {
      if (batchBytes === 0) return;
      const data = Buffer.concat(batch, batchBytes);
      batch = [];
      batchBytes = 0;
      writing = writing.then(async () => {
        await file.writeFile(data); // appends (the file is open in "a" mode), retrying short writes
        inFlight -= data.byteLength;
      });
      writing.catch(() => {}); // awaited below; this only keeps a failed write from counting as unhandled meanwhile
    };
    try {
      for await (const chunk of response.body) {
        state.hash.update(chunk);
        state.have += chunk.byteLength;
        if (state.total !== undefined && state.have > state.total) {
          throw new ServerError("download_failed", {
            message: `${displayUrl(request.url)} sent more bytes than the ${state.total} announced.`,
          });
        }
        batch.push(chunk);
        batchBytes += chunk.byteLength;
        inFlight += chunk.byteLength;
        if (batchBytes >= writeBatchBytes) flush();
        request.onProgress?.(state.have, state.total);
        if (inFlight > maxBytesInFlight) await writing;
      }
    } finally {
      flush();
      await writing; // what arrived is on disk before anything else happens, even after an error
    }
    await file.sync();
  } finally {
    await file.close();
  }
  state.total ??= state.have;
  if (state.have < state.total) throw new RetryableError("the connection closed early");
}

async function restart(partialPath: string, state: TransferState): Promise<void> {
  await truncate(partialPath, 0);
  state.have = 0;
  state.hash = createHash("sha256");
}

/**
 * Follows redirects by hand: the hub's `resolve` answer (302 to a CDN) carries the file's SHA-256
 * and size in `X-Linked-Etag` / `X-Linked-Size`, which an automatic redirect would drop.
 */
async function fetchFollowingRedirects(
  request: DownloadRequest,
  headers: Record<string, string>,
): Promise<{ response: Response; linked: { etag: string | null; size: number | undefined } }> {
  let url = request.url;
  const linked: { etag: string | null; size: number | undefined } = { etag: null, size: undefined };
  for (let hop = 0; hop <= maxRedirects; hop++) {
    const response = await request.fetch(url, { headers, redirect: "manual", signal: request.signal ?? null });
    linked.etag ??= response.headers.get("x-linked-etag");
    const size = Number(response.headers.get("x-linked-size") ?? NaN);
    if (Number.isFinite(size)) linked.size ??= size;
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || !location) return { response, linked };
    await response.body?.cancel();
    url = new URL(location, url).href;
  }
  throw new ServerError("download_failed", { message: `${displayUrl(request.url)} redirects more than ${maxRedirects} times.` });
}

function httpError(url: string, status: number): ServerError {
  if (status === 401 || status === 403) {
    return new ServerError("download_failed", {
      message: `${displayUrl(url)} refused access (HTTP ${status}). For a gated or private repository, accept its terms on the hub and set HF_TOKEN.`,
    });
  }
  if (status === 404) return new ServerError("model_not_found", { message: `${displayUrl(url)} does not exist (HTTP 404).` });
  return new ServerError("download_failed", { message: `${displayUrl(url)} answered HTTP ${status}.` });
}

/** Node's fetch reports network failures (refused, reset, cut off mid-body) as TypeErrors. */
function isNetworkError(error: unknown): boolean {
  return error instanceof TypeError || (error as NodeJS.ErrnoException)?.code === "ECONNRESET" || (error as Error)?.name === "SocketError";
}

/** The URL without its query, which may carry a signed CDN token. */
export function displayUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
