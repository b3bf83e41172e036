import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import type { KvCacheType } from "../src/core/KvCacheType.js";

export interface RunningProcess {
  url: string;
  /** The process's peak resident set so far (VmHWM), in MiB: its memory with the model loaded and used. */
  peakRssMiB(): Promise<number>;
  /** CPU time the process has used so far (user + system), in seconds. */
  cpuSeconds(): Promise<number>;
  stop(): Promise<void>;
}

const repo = path.resolve(import.meta.dirname, "..");
const execFileAsync = promisify(execFile);

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  if (typeof address !== "object" || !address) throw new Error("no port");
  return address.port;
}

async function waitHealthy(url: string, child: ChildProcess, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode}`);
    try {
      const response = await fetch(`${url}/health`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what} did not become healthy`);
}

function running(url: string, child: ChildProcess): RunningProcess {
  // A bench that dies (an uncaught error) takes its servers with it rather than leaving them running.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  return {
    url,
    async peakRssMiB() {
      const status = await readFile(`/proc/${child.pid}/status`, "utf8");
      const kiB = /^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1];
      if (!kiB) throw new Error(`no VmHWM for process ${child.pid}`);
      return Number(kiB) / 1024;
    },
    async cpuSeconds() {
      // /proc/<pid>/stat: utime and stime are the 14th and 15th fields, in clock ticks (100 a second
      // on Linux); the command name (2nd) is in parentheses and may hold spaces.
      const stat = await readFile(`/proc/${child.pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
    async stop() {
      process.off("exit", killOnExit);
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

export interface ServerOptions {
  modelPath: string;
  modelsDir: string;
  threads: number;
  parallel: number;
  contextSize: number;
  /** Keys and values in this type (--cache-type-k, --cache-type-v; both servers spell them alike), or the default f16. */
  cacheType?: KvCacheType;
}

/** The KV cache's flags, when a type other than the default is asked for. */
function cacheTypeFlags(options: ServerOptions): string[] {
  return options.cacheType === undefined ? [] : ["--cache-type-k", options.cacheType, "--cache-type-v", options.cacheType];
}

/** The flags the bench serves modelhost with, the same for every checkout. */
function modelhostFlags(options: ServerOptions & { engine: string }, port: number): Record<string, string> {
  return {
    "--port": String(port),
    "--models-dir": options.modelsDir,
    "--threads": String(options.threads),
    "--parallel": String(options.parallel),
    "--context-size": String(options.contextSize),
    "--engine": options.engine,
    "--log-level": "warn",
  };
}

/**
 * modelhost itself, as users run it: the CLI of this checkout (or of `checkout`, built) in its own
 * process; `extraArgs` for what a workload needs of it (`--upstreams`).
 */
export async function startModelhost(
  options: ServerOptions & { engine: string; checkout?: string; extraArgs?: readonly string[] },
): Promise<RunningProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      path.join(options.checkout ?? repo, "bin/modelhost.cjs"),
      "serve",
      ...Object.entries(modelhostFlags(options, port)).flat(),
      ...cacheTypeFlags(options),
      ...(options.extraArgs ?? []),
    ],
    { stdio: ["ignore", "inherit", "inherit"], env: userEnvironment() },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, options.checkout ? `modelhost in ${options.checkout}` : "modelhost");
  return running(url, child);
}

/**
 * A TypeScript file of the bench run in a process of its own (`node --import tsx`), given `--port`
 * and `args`; it must answer GET /health once it listens.
 */
export async function startScript(file: string, args: readonly string[], what: string): Promise<RunningProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", file, "--port", String(port), ...args], {
    stdio: ["ignore", "inherit", "inherit"],
    env: userEnvironment(),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, what);
  return running(url, child);
}

/**
 * The bench's environment without what `npm run bench` sets for the bench itself
 * (UV_THREADPOOL_SIZE=1): the server runs with libuv's default pool, as users start it. With one
 * pool thread, node-llama-cpp's model load and the context after it shared one malloc arena, and
 * the context reused what the load had freed; with the default four they did not, and peak RSS
 * was 50-70 MiB higher, which the bench did not see.
 */
function userEnvironment(): NodeJS.ProcessEnv {
  const { UV_THREADPOOL_SIZE: _bench, ...env } = process.env;
  return env;
}

/** `serve`'s flags and their defaults, from its --help. */
async function serveFlags(checkout: string): Promise<Map<string, string>> {
  const { stdout } = await execFileAsync(process.execPath, [path.join(checkout, "bin/modelhost.cjs"), "serve", "--help"]);
  const flags = new Map<string, string>();
  for (const [, flag, value] of stdout.matchAll(/^ {2}(--[\w-]+)[^]*?^ +default: (.*?) {3}env:/gm)) flags.set(flag!, value!.trim());
  return flags;
}

/**
 * Another built checkout of modelhost to measure against this one (`--baseline`), named by its
 * commit. Its `serve` must take every flag the bench passes, or the two would not run with the
 * same settings. Flags only one of them has, and defaults that differ, are listed (baseline →
 * this checkout) to be printed: users run the defaults, so they are part of what is compared.
 */
export async function baselineCheckout(dir: string): Promise<{ dir: string; name: string; flagChanges: string[] }> {
  const git = async (...args: string[]) => (await execFileAsync("git", ["-C", dir, ...args])).stdout.trim();
  const commit = await git("rev-parse", "--short", "HEAD");
  const dirty = (await git("status", "--porcelain", "--untracked-files=no")) !== "";
  const name = `modelhost@${commit}${dirty ? "-dirty" : ""}`;
  const theirs = await serveFlags(dir).catch((error: unknown) => {
    throw new Error(
      `${name}: \`modelhost serve --help\` failed in ${dir} (built with \`npx tsc -p tsconfig.build.json\`?): ${String(error)}`,
    );
  });
  const ours = await serveFlags(repo);
  const passed = Object.keys(modelhostFlags({ modelPath: "", modelsDir: "", threads: 0, parallel: 0, contextSize: 0, engine: "" }, 0));
  const missing = passed.filter((flag) => !theirs.has(flag));
  if (missing.length > 0) throw new Error(`${name} has no ${missing.join(", ")}: the bench cannot serve it with this checkout's settings`);
  const flagChanges: string[] = [];
  for (const [flag, value] of ours) {
    if (!theirs.has(flag)) flagChanges.push(`${flag} new (default "${value}")`);
    else if (theirs.get(flag) !== value) flagChanges.push(`${flag} default "${theirs.get(flag)}" → "${value}"`);
  }
  for (const [flag, value] of theirs) if (!ours.has(flag)) flagChanges.push(`${flag} gone (default was "${value}")`);
  return { dir, name, flagChanges };
}

/**
 * llama.cpp's own server on the same file, threads and slots: the anchor users compare with.
 * `extraArgs` for what a workload needs of it (`--embeddings`); otherwise its defaults, such as its
 * host-memory prompt cache (`--cache-ram`).
 */
export async function startLlamaServer(binary: string, options: ServerOptions, extraArgs: readonly string[] = []): Promise<RunningProcess> {
  const port = await freePort();
  const child = spawn(
    binary,
    [
      "--model",
      options.modelPath,
      "--threads",
      String(options.threads),
      "--threads-batch",
      String(options.threads),
      "--parallel",
      String(options.parallel),
      // llama-server splits its context among its slots; ours is per sequence.
      "--ctx-size",
      String(options.contextSize * options.parallel),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--n-gpu-layers",
      "0",
      "--no-webui",
      ...cacheTypeFlags(options),
      ...extraArgs,
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, "llama-server");
  return running(url, child);
}
