import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { startFakeHub, type FakeHub } from "../support/fakeHub.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

/** A terminal (a tmux pane) running one command, read as a person sees it. */
class Terminal {
  readonly #session = `modelhost-run-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

  constructor(command: string[]) {
    const quoted = command.map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
    // The pane outlives the command, so its exit code can be read.
    execFileSync("tmux", ["new-session", "-d", "-s", this.#session, "-x", "200", "-y", "50", `${quoted}; echo EXIT=$?; sleep 600`]);
  }

  /** The pane's text, wrapped lines joined, with its history. */
  screen(): string {
    return execFileSync("tmux", ["capture-pane", "-p", "-J", "-S", "-1000", "-t", this.#session], { encoding: "utf8" });
  }

  keys(...keys: string[]): void {
    execFileSync("tmux", ["send-keys", "-t", this.#session, ...keys]);
  }

  type(text: string): void {
    execFileSync("tmux", ["send-keys", "-l", "-t", this.#session, text]);
  }

  async waitFor(what: string, check: (screen: string) => boolean, timeoutMs = 60_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const screen = this.screen();
      if (check(screen)) return screen;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the terminal shows:\n${screen}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  close(): void {
    try {
      execFileSync("tmux", ["kill-session", "-t", this.#session], { stdio: "ignore" });
    } catch {
      // already gone
    }
  }
}

/** The reply to `message`: the text between its line and the next prompt (or the end). */
function replyAfter(screen: string, message: string): string {
  const start = screen.lastIndexOf(`>>> ${message}`);
  if (start < 0) return "";
  return screen
    .slice(start + message.length + 4)
    .split("\n>>>")[0]!
    .trim();
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.skipIf(!needs("tmux"))("modelhost run in a terminal", () => {
  let hub: FakeHub;
  let home: string;

  beforeAll(async () => {
    hub = await startFakeHub({ "test/Tiny-GGUF": [{ path: "Tiny-Q4_K_M.gguf", content: await readFile(await testModelPath("tiny")) }] });
    home = await mkdtemp(path.join(os.tmpdir(), "modelhost-run-"));
  });

  afterAll(async () => {
    await hub.close();
    await rm(home, { recursive: true, force: true });
  });

  it("pulls a missing model, streams replies, stops one on Ctrl-C, takes multi-line input, and leaves on /bye", async () => {
    const modelsDir = path.join(home, "models");
    // No server answers on this port: run starts its own, in process.
    const port = await freePort();
    const terminal = new Terminal([
      process.execPath,
      bin,
      "run",
      "hf.co/test/Tiny-GGUF:Q4_K_M",
      "--models-dir",
      modelsDir,
      "--hf-endpoint",
      hub.url,
      "--port",
      String(port),
      "--threads",
      "1",
    ]);
    try {
      let screen = await terminal.waitFor("the prompt", (text) => text.trimEnd().endsWith(">>>"));
      expect(screen).toContain("pulling manifest");
      expect(screen).toContain("success");

      // A random-weights model talks until its context is full (seconds): time to see the reply grow.
      terminal.type("Tell me a story");
      terminal.keys("Enter");
      screen = await terminal.waitFor("the reply to begin", (text) => replyAfter(text, "Tell me a story").length > 0);
      const early = replyAfter(screen, "Tell me a story").length;
      screen = await terminal.waitFor("the reply to grow", (text) => replyAfter(text, "Tell me a story").length > early + 20);

      // Ctrl-C stops the reply, and the chat goes on (Ctrl-C at an empty prompt would say how to leave).
      terminal.keys("C-c");
      screen = await terminal.waitFor("a new prompt", (text) => text.trimEnd().endsWith(">>>"), 10_000);
      expect(screen).not.toContain("Use Ctrl + d or /bye to exit.");
      const stopped = replyAfter(screen, "Tell me a story").length;
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(replyAfter(terminal.screen(), "Tell me a story").length).toBe(stopped);

      // A """ block is one message over several lines.
      terminal.type('"""first line');
      terminal.keys("Enter");
      await terminal.waitFor("the continuation prompt", (text) => text.trimEnd().endsWith("..."));
      terminal.type('second line"""');
      terminal.keys("Enter");
      await terminal.waitFor("the reply to the block", (text) => /second line"""\n.+/.test(text) && !text.trimEnd().endsWith("..."));
      terminal.keys("C-c");
      await terminal.waitFor("a new prompt", (text) => text.trimEnd().endsWith(">>>"), 10_000);

      terminal.type("/bye");
      terminal.keys("Enter");
      await terminal.waitFor("the exit code", (text) => /^EXIT=\d+$/m.test(text), 30_000);
      expect(terminal.screen()).toMatch(/^EXIT=0$/m);
    } finally {
      terminal.close();
    }
  });
});

describe("modelhost run with a prompt", () => {
  let server: ServerProcess;
  let serverModels: string;

  beforeAll(async () => {
    serverModels = await mkdtemp(path.join(os.tmpdir(), "modelhost-run-server-"));
    await symlink(await testModelPath("tiny"), path.join(serverModels, "tiny.gguf"));
    server = await startServerProcess(["--models-dir", serverModels, "--context-size", "64"]);
  });

  afterAll(async () => {
    await server.stop();
    await rm(serverModels, { recursive: true, force: true });
  });

  it("answers through the running server and exits", async () => {
    const emptyDir = path.join(serverModels, "elsewhere");
    // The model is only in the server's directory: an answer proves run used the running server.
    const { stdout } = await promisify(execFile)(process.execPath, [
      bin,
      "run",
      "tiny",
      "Say hello.",
      "--port",
      new URL(server.url).port,
      "--models-dir",
      emptyDir,
    ]);
    expect(stdout.trim().length).toBeGreaterThan(0);

    const unknown = await promisify(execFile)(process.execPath, [bin, "run", "nosuch", "Hi", "--port", new URL(server.url).port]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(unknown).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('modelhost: No model "nosuch" is installed. "nosuch" is not a model reference modelhost can pull.'),
    });
  });
});
