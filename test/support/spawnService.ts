import { spawn, type ChildProcess } from "node:child_process";

export interface SpawnedService {
  child: ChildProcess;
  /** What it wrote to stdout and stderr so far (and why it could not start, if it could not). */
  output(): string;
  /** Resolves once it has exited, or failed to start (a binary that cannot start emits 'error' and no 'exit'). */
  exited: Promise<void>;
}

/** Starts a throwaway server binary for a test, collecting its output. */
export function spawnService(binary: string, args: readonly string[]): SpawnedService {
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  // Unheard, a failed start is an uncaught exception.
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", (error) => {
      output += error.message;
      resolve();
    });
  });
  return { child, output: () => output, exited };
}
