import os from "node:os";
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

export interface ServerProcess {
  url: string;
  /** The process id (also its main thread's). */
  pid: number;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM, and waits for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: a crash, nothing flushed. */
  kill(): Promise<void>;
  /** Sends a signal without waiting. */
  signal(name: NodeJS.Signals): void;
  /** Resolves with the exit status as a shell reports it once the process has exited: its code, or 128 + the number of the signal that ended it. */
  exited: Promise<number>;
}

/** Runs `modelhost serve …` as its own process (as replicas and crash tests need) and waits until it listens. */
export async function startServerProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const child: ChildProcess = spawn(process.execPath, [bin, "serve", "--port", "0", "--host", "127.0.0.1", "--threads", "1", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let output = "";
  child.stdout?.on("data", (data: Buffer) => (output += data.toString()));
  child.stderr?.on("data", (data: Buffer) => (output += data.toString()));
  const exited = new Promise<number>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? 128 + os.constants.signals[signal ?? "SIGKILL"])),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000);
    const check = () => {
      const match = /^modelhost: listening on (http:\/\/\S+)/m.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stderr?.on("data", check);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${output}`));
    });
  });
  return {
    url,
    pid: child.pid!,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    },
    signal(name) {
      if (child.exitCode === null) child.kill(name);
    },
    exited,
  };
}
