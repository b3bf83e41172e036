import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";

export interface RunningProcess {
  url: string;
  /** The process's peak resident set so far (VmHWM), in MiB: its memory with the model loaded and used. */
  peakRssMiB(): Promise<number>;
  stop(): Promise<void>;
}

const repo = path.resolve(import.meta.dirname, "..");

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
  return {
    url,
    async peakRssMiB() {
      const status = await readFile(`/proc/${child.pid}/status`, "utf8");
      const kiB = /^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1];
      if (!kiB) throw new Error(`no VmHWM for process ${child.pid}`);
      return Number(kiB) / 1024;
    },
    async stop() {
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
}

/** modelhost itself, as users run it: the CLI in its own process. */
export async function startModelhost(options: ServerOptions & { engine: string }): Promise<RunningProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      path.join(repo, "bin/modelhost.cjs"),
      "serve",
      "--port",
      String(port),
      "--models-dir",
      options.modelsDir,
      "--threads",
      String(options.threads),
      "--parallel",
      String(options.parallel),
      "--context-size",
      String(options.contextSize),
      "--engine",
      options.engine,
      "--log-level",
      "warn",
    ],
    { stdio: ["ignore", "inherit", "inherit"] },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, "modelhost");
  return running(url, child);
}

/** llama.cpp's own server on the same file, threads and slots: the anchor users compare with. */
export async function startLlamaServer(binary: string, options: ServerOptions): Promise<RunningProcess> {
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
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, "llama-server");
  return running(url, child);
}
