import { createHash } from "node:crypto";
import { mkdir, readdir, rename, rm, stat, statfs } from "node:fs/promises";
import path from "node:path";
import { assertModelName, isValidModelName } from "../core/modelName.js";
import type { PullProgress, PullRequestOptions, PullResult } from "../core/ModelStore.js";
import { isServerError, ServerError } from "../core/ServerError.js";
import { GgufRefusal, readGgufHeader } from "../gguf/GgufReader.js";
import { chooseProjector, chooseRepoFiles, type RepoFile } from "./chooseRepoFiles.js";
import { displayUrl, downloadFile } from "./downloadFile.js";
import { withFileLock } from "./fileLock.js";
import { formatBytes } from "./formatBytes.js";
import { defaultModelId, isPlainFileName, splitPartPattern } from "./modelFiles.js";
import { parseModelRef, type ModelRef } from "./modelRef.js";
import { addAdapter, fileNamed, nameModel, readManifest } from "./modelsManifest.js";
import { assertPullUrl, checkingRedirects, pullTransport } from "./pullTransport.js";

export interface FreeSpace {
  bavail: number | bigint;
  bsize: number | bigint;
}

export interface PullOptions extends PullRequestOptions {
  modelsDir: string;
  /** The hub, e.g. https://huggingface.co (MODELHOST_HF_ENDPOINT). */
  hfEndpoint: string;
  /** Sent to the hub only, never to the CDN it redirects to, and never logged. */
  hfToken?: string;
  /** More names for the model, beside the reference as typed; each must be a valid model name. */
  aliases?: string[];
  /** The file is a LoRA adapter: declare it over this model (by name) in models.json, served as `<model>+<adapter>`. */
  adapterOf?: string;
  /** Whether plain http:// may be fetched (--allow-http-pull); it may anyway when `hfEndpoint` is http://. */
  allowHttp?: boolean;
  /** Free space of a directory; `fs.statfs` unless a test simulates a full disk. */
  statfs?: (directory: string) => Promise<FreeSpace>;
  /** First pause before retrying a dropped download (default 500 ms). */
  retryDelayMs?: number;
}

/** One file to fetch: where from, what it must be, and its name in the models directory. */
interface PlannedFile {
  url: string;
  target: string;
  size?: number;
  sha256?: string;
  /** The model's vision projector (its mmproj file), fetched with it; the model's own files have none. */
  projector?: true;
}

/** Progress goes out at most this often per file: enough for a live bar, few lines in a stream. */
const progressIntervalMs = 250;

/**
 * Pulls a model into the models directory: resolves the reference to files (the hub's file list
 * gives each file's size and SHA-256), checks free space, downloads each file to a dot-prefixed
 * `.partial` name the registry never lists (resuming whatever an earlier attempt left), verifies
 * it, renames it into place (a split model's first part last, so it is listed only once whole),
 * and names it in models.json. A model already present with the same content is not fetched again.
 */
export async function pullModel(reference: string, options: PullOptions): Promise<PullResult> {
  const ref = parseModelRef(reference);
  for (const alias of options.aliases ?? []) assertModelName(alias, "alias");
  const transport = pullTransport(options.hfEndpoint, options.allowHttp);
  if (ref.kind === "url") assertPullUrl(new URL(ref.url), transport);
  const report = options.onProgress ?? (() => {});
  const directory = options.modelsDir;
  await mkdir(directory, { recursive: true });
  report({ status: "pulling manifest" });

  const hubFetch = checkingRedirects(fetchWithHubToken(options.hfEndpoint, options.hfToken), transport);
  const { files, source } = await planFiles(ref, options.hfEndpoint, hubFetch, options.signal);
  await chooseTargets(directory, files, source);
  const first = files[0]!;
  const id = isValidModelName(ref.name) ? ref.name : defaultModelId(first.target);
  for (const name of [id, ...(options.aliases ?? [])]) {
    const owner = await fileNamed(directory, name);
    if (owner !== undefined && path.resolve(directory, owner) !== path.join(directory, first.target)) {
      throw new ServerError("invalid_request", {
        param: "model",
        message: `The name "${name}" already belongs to another model (${path.basename(owner)}). Remove it first: modelhost rm ${name}`,
      });
    }
  }

  // Its base must be there before anything is fetched for it.
  const base = options.adapterOf === undefined ? undefined : await fileNamed(directory, options.adapterOf);
  if (options.adapterOf !== undefined && base === undefined) {
    throw new ServerError("model_not_found", { model: options.adapterOf, param: "adapter_of" });
  }
  const lock = path.join(directory, `.${first.target}.pull.lock`);
  const busyMessage = `${first.target} is already being pulled (by another command or request); wait for it to finish.`;
  return withFileLock(lock, { waitMs: 0, staleAfterMs: Infinity, busyMessage }, async () => {
    let downloadedBytes = 0;
    let sha256 = (await readManifest(directory)).entries.find((entry) => entry.file === first.target && entry.source === source)?.sha256;
    // What is there already from the same place: all of it, or the model without the projector
    // later pulls fetch with it (pulled before modelhost read images).
    const missing = await missingFiles(directory, files, source);
    for (const file of files) {
      if (!missing.includes(file)) report({ status: pullingStatus(file), ...digestOf(file), total: file.size, completed: file.size });
    }
    if (missing.length > 0) {
      const partials = missing.map((file) => path.join(directory, partialName(file)));
      await ensureSpace(directory, missing, partials, options.statfs ?? statfs);
      for (const [index, file] of missing.entries()) {
        const result = await downloadPart(file, partials[index]!, hubFetch, options, report);
        downloadedBytes += result.downloadedBytes;
        if (file === first) sha256 = result.sha256;
      }
      report({ status: "verifying sha256 digest" });
      // The projector, then the last part first: the registry lists a split model by its first
      // part, which must come last, and with its projector beside it.
      for (const [index, file] of [...missing.entries()].reverse()) await rename(partials[index]!, path.join(directory, file.target));
      await removeStalePartials(directory, missing);
    }
    const projector = files.find((file) => file.projector)?.target;

    report({ status: "writing manifest" });
    const existing = (await readManifest(directory)).entries.find((entry) => entry.file === first.target);
    // A model someone already named keeps its id; the reference becomes one more name for it.
    const keepId = existing?.id !== undefined && existing.id !== id;
    const aliases = [...(keepId ? [id] : []), ...(options.aliases ?? [])];
    await nameModel(directory, {
      file: first.target,
      ...(keepId ? {} : { id }),
      aliases,
      source,
      ...(sha256 ? { sha256 } : {}),
      ...(projector === undefined ? {} : { projector }),
    });
    if (base !== undefined) await addAdapter(directory, base, first.target);
    report({ status: "success" });
    return {
      id: keepId ? existing.id! : id,
      path: path.join(directory, first.target),
      downloadedBytes,
      ...(base !== undefined ? { adapter: `${options.adapterOf!}+${defaultModelId(first.target)}` } : {}),
    };
  });
}

/** Adds the hub token to requests for the hub's own origin; a CDN it redirects to never sees it. */
function fetchWithHubToken(hfEndpoint: string, token: string | undefined): typeof fetch {
  const hubOrigin = new URL(hfEndpoint).origin;
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (!token || url.origin !== hubOrigin) return fetch(input, init);
    const headers = new Headers(init?.headers);
    headers.set("Authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
}

/** The files a reference means, and `source`: where they came from (`hf.co/OWNER/REPO/FILE.gguf` or the URL). */
async function planFiles(
  ref: ModelRef,
  hfEndpoint: string,
  hubFetch: typeof fetch,
  signal: AbortSignal | undefined,
): Promise<{ files: PlannedFile[]; source: string }> {
  if (ref.kind === "url") {
    return { files: [{ url: ref.url, target: targetName(urlFileName(ref.url), ref.url) }], source: ref.url };
  }
  const repoFiles = await listRepoFiles(ref.repo, hfEndpoint, hubFetch, signal);
  const chosen = chooseRepoFiles(ref.repo, repoFiles, ref);
  const planned = (file: RepoFile, target: string): PlannedFile => ({
    url: `${hfEndpoint}/${ref.repo}/resolve/main/${file.path.split("/").map(encodeURIComponent).join("/")}`,
    target,
    size: file.size,
    ...(file.sha256 ? { sha256: file.sha256 } : {}),
  });
  const files = chosen.map((file) => planned(file, targetName(path.posix.basename(file.path), file.path)));
  // The repository's projector comes too, named after the model (repositories often name theirs
  // just `mmproj-model-f16.gguf`), so models pulled into one folder keep theirs apart.
  const projector = chooseProjector(repoFiles, chosen);
  if (projector) {
    const model = files[0]!.target.replace(splitPartPattern, "").replace(/\.gguf$/i, "");
    files.push({ ...planned(projector, `mmproj-${model}.gguf`), projector: true });
  }
  // The same file whichever mirror served it.
  const hub = new URL(hfEndpoint).host === "huggingface.co" ? "hf.co" : hfEndpoint;
  return { files, source: `${hub}/${ref.repo}/${chosen[0]!.path}` };
}

/**
 * The name a pulled file gets in the models directory: its own, which must be a plain file name
 * (a URL's `%2F..%2F` decodes to a path, which is refused rather than followed out of the directory).
 */
function targetName(name: string, from: string): string {
  if (isPlainFileName(name)) return name;
  throw new ServerError("invalid_request", {
    param: "model",
    message: `${JSON.stringify(from.slice(0, 200))} does not end in a plain .gguf file name.`,
  });
}

/** The decoded last segment of a URL's path; "" when it does not decode. */
function urlFileName(url: string): string {
  try {
    return decodeURIComponent(path.posix.basename(new URL(url).pathname));
  } catch {
    return "";
  }
}

/** The repository's files, through the hub's file-list API (`/api/models/OWNER/REPO/tree/main`). */
async function listRepoFiles(
  repo: string,
  hfEndpoint: string,
  hubFetch: typeof fetch,
  signal: AbortSignal | undefined,
): Promise<RepoFile[]> {
  // Imported here: only a pull needs it, and the server starts without it.
  const { listFiles } = await import("@huggingface/hub");
  const signalled: typeof fetch = (input, init) => hubFetch(input, { ...init, signal: signal ?? null });
  const files: RepoFile[] = [];
  try {
    for await (const entry of listFiles({ repo: { type: "model", name: repo }, recursive: true, hubUrl: hfEndpoint, fetch: signalled })) {
      if (entry.type !== "file") continue;
      files.push({ path: entry.path, size: entry.lfs?.size ?? entry.size, ...(entry.lfs ? { sha256: entry.lfs.oid } : {}) });
    }
  } catch (error) {
    if (signal?.aborted) throw signal.reason ?? error;
    // A redirect the transport refused says so itself.
    if (isServerError(error)) throw error;
    const status = (error as { statusCode?: number }).statusCode;
    // The hub answers 401 for a repository that does not exist as for a private one.
    if (status === 401 || status === 404) {
      throw new ServerError("model_not_found", {
        model: repo,
        message: `The repository ${repo} does not exist on ${hfEndpoint} (or it is private: set HF_TOKEN to a token that may read it).`,
      });
    }
    if (status === 403) {
      throw new ServerError("download_failed", {
        message: `${hfEndpoint} refused to list ${repo} (HTTP 403): the repository is gated. Accept its terms on the hub, and set HF_TOKEN to a token of that account.`,
        cause: error,
      });
    }
    const reason =
      status === undefined ? (((error as Error).cause as Error | undefined)?.message ?? (error as Error).message) : `HTTP ${status}`;
    throw new ServerError("download_failed", { message: `Could not list the files of ${repo} on ${hfEndpoint}: ${reason}.`, cause: error });
  }
  return files;
}

/**
 * Files keep their hub names; if one of that name came from elsewhere, this one gets its
 * repository's name in front rather than replace it.
 */
async function chooseTargets(directory: string, files: PlannedFile[], source: string): Promise<void> {
  const { entries } = await readManifest(directory);
  const first = files[0]!.target;
  const owner = entries.find((entry) => entry.file === first);
  const taken = owner ? owner.source !== source : await exists(path.join(directory, first));
  if (!taken) return;
  const prefix = `${createHash("sha256").update(source).digest("hex").slice(0, 8)}-`;
  for (const file of files) file.target = prefix + file.target;
}

/**
 * The files still to fetch: none of what is there from the same place with the same content (the
 * manifest says where the model came from and its first file's SHA-256; each file has its size),
 * else all of them.
 */
async function missingFiles(directory: string, files: PlannedFile[], source: string): Promise<PlannedFile[]> {
  const entry = (await readManifest(directory)).entries.find((candidate) => candidate.file === files[0]!.target);
  if (!entry || entry.source !== source) return files;
  if (files[0]!.sha256 !== undefined && entry.sha256 !== files[0]!.sha256) return files;
  const missing: PlannedFile[] = [];
  for (const file of files) {
    const size = await sizeOf(path.join(directory, file.target));
    if (size === undefined || (file.size !== undefined && size !== file.size)) missing.push(file);
  }
  return missing;
}

async function ensureSpace(
  directory: string,
  files: PlannedFile[],
  partials: string[],
  freeSpace: (directory: string) => Promise<FreeSpace>,
): Promise<void> {
  let needed = 0;
  for (const [index, file] of files.entries()) {
    if (file.size !== undefined) needed += Math.max(0, file.size - ((await sizeOf(partials[index]!)) ?? 0));
  }
  await checkFree(directory, needed, freeSpace);
}

async function checkFree(directory: string, needed: number, freeSpace: (directory: string) => Promise<FreeSpace>): Promise<void> {
  const stats = await freeSpace(directory);
  const free = Number(stats.bavail) * Number(stats.bsize);
  if (needed > free) {
    throw new ServerError("insufficient_storage", {
      message: `Not enough disk space in the models directory: the model needs ${formatBytes(needed)} more, and ${formatBytes(free)} is free.`,
    });
  }
}

async function downloadPart(
  file: PlannedFile,
  partialPath: string,
  hubFetch: typeof fetch,
  options: PullOptions,
  report: (progress: PullProgress) => void,
): Promise<{ downloadedBytes: number; sha256: string }> {
  const startedWith = (await sizeOf(partialPath)) ?? 0;
  const progress = throttled(progressIntervalMs, (completed: number, total: number | undefined) =>
    report({ status: pullingStatus(file), ...digestOf(file), ...(total === undefined ? {} : { total }), completed }),
  );
  try {
    const result = await downloadFile({
      url: file.url,
      partialPath,
      ...(file.size === undefined ? {} : { expectedSize: file.size }),
      ...(file.sha256 === undefined ? {} : { expectedSha256: file.sha256 }),
      fetch: hubFetch,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.retryDelayMs === undefined ? {} : { retryDelayMs: options.retryDelayMs }),
      // Only a plain URL's size is learnt this late; hub files were checked before the first byte.
      reserve: file.size === undefined ? (bytes) => checkFree(path.dirname(partialPath), bytes, options.statfs ?? statfs) : undefined,
      onProgress: progress.update,
    });
    progress.update(result.size, result.size);
    await assertGguf(partialPath, file);
    return { downloadedBytes: result.size - startedWith, sha256: result.sha256 };
  } finally {
    progress.flush();
  }
}

/**
 * Calls `emit` at most once per interval with the latest values, and once more at the end of an
 * interval that had news, so a stalled download shows where it stands.
 */
function throttled<A extends unknown[]>(
  intervalMs: number,
  emit: (...args: A) => void,
): { update: (...args: A) => void; flush: () => void } {
  let last = 0;
  let pending: A | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending === undefined) return;
    const args = pending;
    pending = undefined;
    last = Date.now();
    emit(...args);
  };
  return {
    update: (...args) => {
      pending = args;
      const wait = last + intervalMs - Date.now();
      if (wait <= 0) flush();
      else timer ??= setTimeout(flush, wait);
    },
    flush,
  };
}

/**
 * Every file (each part of a split one has a GGUF header of its own) must pass the bounded GGUF
 * reader before it is renamed into place: a URL that answers with something else (an HTML page, a
 * safetensors file), or a malformed GGUF, is refused and deleted rather than installed.
 */
async function assertGguf(partialPath: string, file: PlannedFile): Promise<void> {
  let header;
  try {
    header = await readGgufHeader(partialPath);
  } catch (error) {
    if (!(error instanceof GgufRefusal)) throw error;
    await rm(partialPath, { force: true });
    throw new ServerError("invalid_model_file", {
      message: `${displayUrl(file.url)} is not a GGUF model llama.cpp could load (${error.message}); it was not installed.`,
      cause: error,
    });
  }
  // llama.cpp's converter writes projectors as architecture "clip"; mtmd reads nothing else.
  if (file.projector && header.metadata.get("general.architecture") !== "clip" && !header.metadata.has("clip.has_vision_encoder")) {
    await rm(partialPath, { force: true });
    throw new ServerError("invalid_model_file", {
      message: `${displayUrl(file.url)}, the repository's mmproj file, is not a vision projector (its GGUF has no clip metadata); nothing was installed.`,
    });
  }
}

/** Ollama names a layer by the first 12 hex digits of its digest; a file of unknown digest by its name. */
function pullingStatus(file: PlannedFile): string {
  return `pulling ${file.sha256?.slice(0, 12) ?? file.target}`;
}

function digestOf(file: PlannedFile): { digest?: string } {
  return file.sha256 === undefined ? {} : { digest: `sha256:${file.sha256}` };
}

/** Dot-prefixed and not `.gguf`, so never listed; named after the content so a changed file starts afresh. */
function partialName(file: PlannedFile): string {
  const version = file.sha256 ?? createHash("sha256").update(file.url).digest("hex");
  return `.${file.target}.${version.slice(0, 12)}.partial`;
}

/** Partial downloads of earlier versions of these files, which can never be resumed now. */
async function removeStalePartials(directory: string, files: PlannedFile[]): Promise<void> {
  const names = await readdir(directory);
  for (const file of files) {
    for (const name of names)
      if (name.startsWith(`.${file.target}.`) && name.endsWith(".partial")) await rm(path.join(directory, name), { force: true });
  }
}

async function sizeOf(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).size;
  } catch {
    return undefined;
  }
}

async function exists(file: string): Promise<boolean> {
  return (await sizeOf(file)) !== undefined;
}
