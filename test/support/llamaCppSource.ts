import { execFile } from "node:child_process";
import { access, mkdir, rename, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

/**
 * llama.cpp's source tree as node-llama-cpp ships it (node_modules/node-llama-cpp/llama/gitRelease.bundle,
 * a 35 MB git bundle of one commit): its models/templates/*.jinja (70 real chat templates at node-llama-cpp 3.22.1),
 * models/ggml-vocab-*.gguf (real vocabularies) and the sources bench/llamaCpp.ts builds llama-server from.
 *
 * The bundle is cloned once into the cache (~/.cache/modelhost-bench, where the bench has always built),
 * in a folder named after the bundle's commit, so a node-llama-cpp upgrade gets a fresh tree rather than a
 * stale one. Vitest runs files in parallel worker processes that may all ask at once: each clones into a
 * private temporary folder and renames it into place. rename() of a folder onto an existing non-empty one
 * fails, so exactly one clone wins and the others delete theirs; a reader never sees a half-written tree.
 */
const repo = path.resolve(import.meta.dirname, "../..");
const bundle = path.join(repo, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
export const llamaCppCacheDir = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "modelhost-bench");

const exec = promisify(execFile);

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/** The commit the bundle holds (its one head), e.g. de3ff815ea7d… for node-llama-cpp 3.22.1. */
async function bundleCommit(): Promise<string> {
  const { stdout } = await exec("git", ["bundle", "list-heads", bundle]);
  const commit = /^([0-9a-f]{40}) /m.exec(stdout)?.[1];
  if (commit === undefined) throw new Error(`no head in ${bundle}: ${stdout}`);
  return commit;
}

async function cloneOnce(): Promise<string> {
  const commit = await bundleCommit();
  // 12 hex digits: unique among llama.cpp's ~100k commits, short enough for a readable path.
  const sourceDir = path.join(llamaCppCacheDir, `llama.cpp-${commit.slice(0, 12)}`);
  if (await exists(sourceDir)) return sourceDir;
  await mkdir(llamaCppCacheDir, { recursive: true });
  const temporary = `${sourceDir}.partial-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    await exec("git", ["clone", "--quiet", bundle, temporary], { maxBuffer: 1 << 20 });
    await rename(temporary, sourceDir).catch(async (error: NodeJS.ErrnoException) => {
      // Another process renamed its clone into place first: use that one.
      if ((error.code === "ENOTEMPTY" || error.code === "EEXIST") && (await exists(sourceDir))) return;
      throw error;
    });
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
  return sourceDir;
}

let pending: Promise<string> | undefined;

/** The path of llama.cpp's source tree, cloning the bundle on first use (about 10 s); later calls reuse it. */
export function llamaCppSource(): Promise<string> {
  if (pending === undefined) {
    pending = cloneOnce();
    // A failed clone (no git, a full disk) is retried by the next caller rather than cached.
    pending.catch(() => (pending = undefined));
  }
  return pending;
}
