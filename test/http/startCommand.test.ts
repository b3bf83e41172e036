// What a newcomer sees after `npm start`: a hint when there is no model, short log lines on a
// terminal, JSON lines when the output goes to a pipe or a file, and no credentials in either.
import { spawn } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/cli/createLogger.js";
import { needs } from "../support/debianPackages.js";
import { startServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");
const SECRET = "mh_ThisIsNotARealTokenButItMustNotBeLogged0";
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

function getModels(url: string): Promise<Response> {
  return fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${SECRET}` } });
}

async function waitFor(condition: () => boolean, what: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting; output so far:\n${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("modelhost serve, as a newcomer starts it", () => {
  let emptyDir: string;
  let modelsDir: string;

  beforeAll(async () => {
    emptyDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-start-empty-"));
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-start-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterAll(async () => {
    await rm(emptyDir, { recursive: true, force: true });
    await rm(modelsDir, { recursive: true, force: true });
  });

  it("says in one line how to add a model when there is none, and not when there is one", async () => {
    for (const [dir, hinted] of [
      [emptyDir, true],
      [modelsDir, false],
    ] as const) {
      const server = await startServerProcess(["--models-dir", dir]);
      expect(await server.stop()).toBe(0);
      const hint = server
        .output()
        .split("\n")
        .filter((line) => line.includes("no models in"));
      if (hinted) {
        expect(hint).toEqual([
          `modelhost: no models in ${dir} yet. Add one: \`npx modelhost pull hf.co/OWNER/REPO:QUANT\`, or copy a .gguf file there, or make a tiny test model: \`npm run make-test-model -- --preset tiny --out ${dir}/tiny.gguf\``,
        ]);
      } else {
        expect(hint).toEqual([]);
      }
    }
  });

  it("logs JSON lines when stdout is a pipe, one object per line, the finished request's with its method and URL", async () => {
    const server = await startServerProcess(["--models-dir", modelsDir]);
    try {
      expect((await getModels(server.url)).status).toBe(200);
      await waitFor(() => server.output().includes('"request completed"'), server.output);
    } finally {
      await server.stop();
    }
    const lines = server
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"));
    const entries = lines.map((line) => JSON.parse(line) as { msg: string; res?: unknown });
    expect(entries.find((entry) => entry.msg === "request completed")?.res).toEqual({ statusCode: 200, method: "GET", url: "/v1/models" });
    expect(server.output()).not.toContain(SECRET);
  });

  it.skipIf(!needs("bsdutils"))("logs one short line per request on a terminal, and keeps the listening line", async () => {
    // `script` runs the server in a pseudo-terminal and copies what it shows to our pipe. The
    // shell says its process id first, so the test can stop the server itself (it runs in a
    // session of its own, out of reach of a signal to script's process group).
    const command = `echo "pid $$"; exec ${process.execPath} ${bin} serve --port 0 --host 127.0.0.1 --threads 1 --models-dir ${modelsDir}`;
    const terminal = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["ignore", "pipe", "pipe"] });
    let screen = "";
    terminal.stdout.on("data", (chunk: Buffer) => (screen += chunk.toString()));
    terminal.stderr.on("data", (chunk: Buffer) => (screen += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => terminal.once("exit", resolve));
    const text = () => screen.replace(ANSI, "").replace(/\r/g, "");
    let pid: number | undefined;
    try {
      await waitFor(() => /listening on http/.test(text()), text);
      pid = Number(/^pid (\d+)/m.exec(text())?.[1]);
      const url = /^modelhost: listening on (http:\/\/\S+)/m.exec(text())![1]!;
      expect((await getModels(url)).status).toBe(200);
      expect((await fetch(`${url}/v1/nothing-here`)).status).toBe(404);
      await waitFor(() => / 404 \d+ ms/.test(text()), text);
    } finally {
      if (pid) process.kill(pid, "SIGTERM");
      else terminal.kill("SIGKILL");
    }
    expect(await exited).toBe(0);

    const lines = text().split("\n");
    expect(lines.filter((line) => /^\d\d:\d\d:\d\d GET \/v1\/models 200 \d+ ms$/.test(line))).toHaveLength(1);
    expect(lines.filter((line) => /^\d\d:\d\d:\d\d GET \/v1\/nothing-here 404 \d+ ms$/.test(line))).toHaveLength(1);
    expect(
      lines.filter((line) => /^\d\d:\d\d:\d\d INFO +modelhost listening url=http:\/\/127\.0\.0\.1:\d+ profile=local /.test(line)),
    ).toHaveLength(1);
    expect(lines.filter((line) => line.startsWith("modelhost: listening on http://127.0.0.1:"))).toHaveLength(1);
    // Colored: the terminal sees escape codes; no JSON, and no credentials.
    expect(screen).toMatch(ANSI);
    expect(lines.filter((line) => line.startsWith("{"))).toEqual([]);
    expect(screen).not.toContain(SECRET);
  });

  it("redacts credentials in the pretty format as in JSON", () => {
    for (const format of ["pretty", "json"] as const) {
      const written: string[] = [];
      const logger = createLogger("info", { format, destination: { write: (line: string) => void written.push(line) } });
      logger.info({ authorization: `Bearer ${SECRET}`, token: SECRET, req: { headers: { authorization: SECRET } } }, "careful");
      expect(written).toHaveLength(1);
      expect(written[0]).toContain("careful");
      expect(written[0]).toContain("[redacted]");
      expect(written[0]).not.toContain(SECRET);
    }
  });
});
