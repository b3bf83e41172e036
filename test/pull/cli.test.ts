import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeHub, type FakeHub } from "../support/fakeHub.js";
import { startServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");
const run = promisify(execFile);

let hub: FakeHub;
let home: string;
let modelsDir: string;
let model: Buffer;

async function modelhost(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { env: { ...process.env, HF_TOKEN: "hf_cli_token" } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

beforeAll(async () => {
  model = await readFile(await testModelPath("tiny"));
  hub = await startFakeHub({ "test/Tiny-GGUF": [{ path: "Tiny-Q4_K_M.gguf", content: model }] });
  home = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-pull-"));
  modelsDir = path.join(home, "models");
});

afterAll(async () => {
  await hub.close();
  await rm(home, { recursive: true, force: true });
});

describe("model management from the command line", () => {
  it("pulls with plain progress lines when not on a terminal, then lists, shows and removes", async () => {
    const pulled = await modelhost(
      "pull",
      "hf.co/test/Tiny-GGUF:Q4_K_M",
      "--alias",
      "tiny",
      "--models-dir",
      modelsDir,
      "--hf-endpoint",
      hub.url,
    );
    expect(pulled.code).toBe(0);
    expect(pulled.stdout).toBe(`hf.co/test/Tiny-GGUF:Q4_K_M: downloaded 322.5 KiB, in ${modelsDir}.\n`);
    const lines = pulled.stderr.trim().split("\n");
    expect(lines[0]).toBe("pulling manifest");
    expect(lines).toContain("pulling 9503b9b5fdee: 100% (322.5 KiB/322.5 KiB)");
    expect(lines.slice(-3)).toEqual(["verifying sha256 digest", "writing manifest", "success"]);
    // The token went to the hub, and appears in no output.
    expect(hub.requests.some((request) => request.authorization === "Bearer hf_cli_token")).toBe(true);
    expect(pulled.stdout + pulled.stderr).not.toContain("hf_cli_token");

    const table = await modelhost("list", "--models-dir", modelsDir);
    expect(table.stdout).toMatch(
      /^ID\s+ALIASES\s+ARCH\s+PARAMS\s+QUANT\s+CONTEXT\s+SIZE\s+TEMPLATE\s+SERVES\nhf\.co\/test\/Tiny-GGUF:Q4_K_M\s+tiny\s+llama\s/,
    );
    for (const command of ["list", "models"]) {
      const listed = JSON.parse((await modelhost(command, "--json", "--models-dir", modelsDir)).stdout) as {
        id: string;
        aliases: string[];
        sha256: string;
      }[];
      expect(listed).toMatchObject([
        { id: "hf.co/test/Tiny-GGUF:Q4_K_M", aliases: ["tiny"], architecture: "llama", sizeBytes: model.length },
      ]);
    }
    const shown = JSON.parse((await modelhost("show", "tiny", "--json", "--models-dir", modelsDir)).stdout) as Record<string, unknown>;
    expect(shown).toMatchObject({
      id: "hf.co/test/Tiny-GGUF:Q4_K_M",
      source: `${hub.url}/test/Tiny-GGUF/Tiny-Q4_K_M.gguf`,
      path: path.join(modelsDir, "Tiny-Q4_K_M.gguf"),
    });
    expect((await modelhost("show", "tiny", "--models-dir", modelsDir)).stdout).toMatch(
      /^id\s+hf\.co\/test\/Tiny-GGUF:Q4_K_M\naliases\s+tiny\n/,
    );

    // An alias goes alone; the id takes the file.
    expect((await modelhost("rm", "tiny", "--models-dir", modelsDir)).stdout).toBe(
      "Removed the alias tiny (of hf.co/test/Tiny-GGUF:Q4_K_M).\n",
    );
    expect((await modelhost("rm", "hf.co/test/Tiny-GGUF:Q4_K_M", "--models-dir", modelsDir)).stdout).toBe(
      "Deleted hf.co/test/Tiny-GGUF:Q4_K_M (322.5 KiB).\n",
    );
    expect(await readdir(modelsDir)).toEqual(["models.json"]);
    expect(JSON.parse((await modelhost("list", "--json", "--models-dir", modelsDir)).stdout)).toEqual([]);

    // An interrupted download is never listed as a model, but list says it is there.
    await writeFile(path.join(modelsDir, ".Other-Q8_0.gguf.0123456789ab.partial"), Buffer.alloc(10));
    expect((await modelhost("list", "--models-dir", modelsDir)).stdout).toBe(
      `1 interrupted download(s) (10 B) wait in ${modelsDir} as .*.partial files: pull again to resume, or delete them.\n` +
        `No models in ${modelsDir}. Pull one (modelhost pull hf.co/OWNER/REPO:QUANT) or copy a .gguf file there.\n`,
    );

    const missing = await modelhost("show", "tiny", "--models-dir", modelsDir);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('No model "tiny"');
  });

  it("stops on Ctrl-C keeping the partial download, and the same command resumes it", async () => {
    const dir = path.join(home, "interrupted");
    const half = Math.floor(model.length / 2);
    const before = hub.bytesServed();
    hub.stallNextAfter(half);
    const args = [bin, "pull", "hf.co/test/Tiny-GGUF:Q4_K_M", "--models-dir", dir, "--hf-endpoint", hub.url];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (data: Buffer) => (stderr += data.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    const deadline = Date.now() + 30_000;
    while (!stderr.includes("pulling 9503b9b5fdee: 50%") && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    child.kill("SIGINT");
    expect(await exited).toBe(2);
    expect(stderr).toContain("modelhost: Interrupted. Run the same command again to resume the download.");
    expect((await readdir(dir)).filter((name) => name.endsWith(".partial"))).toHaveLength(1);

    const resumed = await modelhost(...args.slice(1));
    // Only the second half: 165,136 bytes.
    expect(resumed.stdout).toBe(`hf.co/test/Tiny-GGUF:Q4_K_M: downloaded 161.3 KiB, in ${dir}.\n`);
    expect(hub.bytesServed() - before).toBe(model.length);
  });

  it("says what went wrong, with exit code 2, for an unknown quantization or a bad reference", async () => {
    const quant = await modelhost("pull", "hf.co/test/Tiny-GGUF:Q2_K", "--models-dir", modelsDir, "--hf-endpoint", hub.url);
    expect(quant.code).toBe(2);
    expect(quant.stderr).toContain('modelhost: The repository test/Tiny-GGUF has no file in quantization "Q2_K". Available: Q4_K_M');
    const bad = await modelhost("pull", "not a reference", "--models-dir", modelsDir, "--hf-endpoint", hub.url);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("is not a model reference modelhost can pull");
    expect((await modelhost("pull", "--models-dir", modelsDir)).stderr).toContain("Usage: modelhost pull REF");
  });

  it("refuses a --alias or an rm name outside the model name grammar, before fetching or changing anything", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-names-"));
    try {
      const requests = hub.requests.length;
      for (const alias of ["../escaped", "a\\..\\..\\escaped", "NUL", "con.gguf", "..", "x".repeat(300)]) {
        const pulled = await modelhost(
          "pull",
          "hf.co/test/Tiny-GGUF:Q4_K_M",
          "--alias",
          alias,
          "--models-dir",
          dir,
          "--hf-endpoint",
          hub.url,
        );
        expect(pulled.code, alias).toBe(2);
        expect(pulled.stderr).toContain("is not a model name: ");
        expect(pulled.stderr).toContain("Usage: modelhost pull REF");
      }
      expect(hub.requests.length).toBe(requests);
      await writeFile(path.join(dir, "tiny.gguf"), model);
      // An alias written into models.json by hand (or by an older version) is not a name either.
      await writeFile(path.join(dir, "models.json"), JSON.stringify({ models: [{ file: "tiny.gguf", aliases: ["../escaped"] }] }));
      const removed = await modelhost("rm", "../escaped", "--models-dir", dir);
      expect(removed.code).toBe(2);
      expect(removed.stderr).toContain('"../escaped" is not a model name: ');
      const listed = await modelhost("list", "--models-dir", dir);
      expect(listed.stdout).toContain("models.json: models.0.aliases.0 is ignored: ");
      expect((await readdir(dir)).sort()).toEqual(["models.json", "tiny.gguf"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a plain http:// URL unless --allow-http-pull true (or an http:// --hf-endpoint) allows it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-http-"));
    try {
      const url = `${hub.url}/files/Tiny-Q4_K_M.gguf`;
      const requests = hub.requests.length;
      const refused = await modelhost("pull", url, "--models-dir", dir);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("models are pulled over https only");
      expect(refused.stderr).toContain("--allow-http-pull true (MODELHOST_ALLOW_HTTP_PULL=true)");
      expect(hub.requests.length).toBe(requests);
      const allowed = await modelhost("pull", url, "--models-dir", dir, "--allow-http-pull", "true");
      expect(allowed).toMatchObject({ code: 0, stdout: `Tiny-Q4_K_M: downloaded 322.5 KiB, in ${dir}.\n` });
      expect((await modelhost("pull", url, "--models-dir", dir, "--allow-http-pull", "maybe")).stderr).toContain(
        'Invalid value "maybe" for --allow-http-pull: must be "true" or "false".',
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("pulls with serve --pull, then serves the model; ps shows what the server has loaded", async () => {
    const dir = path.join(home, "served");
    const reference = "hf.co/test/Tiny-GGUF:Q4_K_M";
    const server = await startServerProcess(["--pull", reference, "--hf-endpoint", hub.url, "--models-dir", dir, "--context-size", "64"]);
    try {
      expect(server.output()).toContain(`${reference}: downloaded 322.5 KiB`);
      const port = new URL(server.url).port;
      expect(JSON.parse((await modelhost("ps", "--json", "--port", port)).stdout)).toEqual([]);

      const chat = await fetch(`${server.url}/api/chat`, {
        method: "POST",
        body: JSON.stringify({ model: reference, messages: [{ role: "user", content: "Hi" }], stream: false, options: { num_predict: 2 } }),
      });
      expect(chat.status).toBe(200);
      const loaded = JSON.parse((await modelhost("ps", "--json", "--port", port)).stdout) as { name: string }[];
      expect(loaded).toMatchObject([{ name: reference }]);
      const table = (await modelhost("ps", "--port", port)).stdout;
      expect(table).toMatch(/^NAME\s+SIZE\s+PROCESSOR\s+CONTEXT\s+UNTIL\n/);
      expect(table).toMatch(/hf\.co\/test\/Tiny-GGUF:Q4_K_M\s+.*100% CPU\s+.*minutes from now/);
    } finally {
      await server.stop();
    }
    const none = await modelhost("ps", "--port", "9");
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain("No modelhost server answers at http://127.0.0.1:9");
  });

  it("prints every listing of the hosted profile as JSON with --json", async () => {
    const dataDir = path.join(home, "data");
    expect((await modelhost("account", "create", "alice", "--data-dir", dataDir)).code).toBe(0);
    const token = await modelhost("token", "create", "--account", "alice", "--name", "laptop", "--data-dir", dataDir);
    const secret = token.stdout.trim().split("\n").at(-1)!;

    const accounts = JSON.parse((await modelhost("account", "list", "--json", "--data-dir", dataDir)).stdout) as unknown[];
    expect(accounts).toMatchObject([{ name: "alice", tier: "free", disabled: false }]);
    const tokensOut = (await modelhost("token", "list", "--json", "--data-dir", dataDir)).stdout;
    expect(JSON.parse(tokensOut)).toMatchObject([{ name: "laptop", revokedAt: null }]);
    expect(tokensOut).not.toContain(secret);
    expect(JSON.parse((await modelhost("usage", "--json", "--data-dir", dataDir)).stdout)).toEqual([]);
  });
});
