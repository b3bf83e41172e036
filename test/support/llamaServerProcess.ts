import { spawn } from "node:child_process";
import { once } from "node:events";
import { freePort } from "./freePort.js";

/** A llama-server process the test started, on a loopback port of its own. */
export interface LlamaServerProcess {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** What it wrote to stderr so far (for failure messages). */
  log(): string;
  /** Ends it, resolving once it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts llama-server (`binary`, built by llamaCppBuild.ts) with `args` on a free loopback port,
 * and resolves once its /health answers: a cross-check's anchor, run on the same files. Its own
 * exit, or 60 s without health, fails with the end of its log.
 */
export async function startLlamaServerProcess(binary: string, args: readonly string[]): Promise<LlamaServerProcess> {
  const port = await freePort();
  const child = spawn(binary, [...args, "--host", "127.0.0.1", "--port", String(port)], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}:\n${log.slice(-3000)}`);
    const healthy = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => response.ok,
      () => false,
    );
    if (healthy) break;
    if (Date.now() > deadline) {
      child.kill();
      throw new Error(`llama-server did not become healthy:\n${log.slice(-3000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    url,
    log: () => log,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill();
      await exited;
    },
  };
}
