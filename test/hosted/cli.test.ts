import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

const run = promisify(execFile);
const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

describe("hosted profile CLI and crash safety (SQLite)", () => {
  let dataDir: string;
  let modelsDir: string;

  async function modelhost(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(process.execPath, [bin, ...args, "--data-dir", dataDir]);
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  const chat = (url: string, token: string) =>
    fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 3 }),
    });

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-data-"));
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
    await rm(modelsDir, { recursive: true, force: true });
  });

  it("creates, lists and disables accounts; refuses duplicates and unknown tiers", async () => {
    expect((await modelhost("account", "create", "alice")).stdout).toMatch(/alice\s+acct_\S+\s+free\s+active/);
    const duplicate = await modelhost("account", "create", "alice");
    expect(duplicate.code).toBe(2);
    expect(duplicate.stderr).toMatch(/alice/);
    expect((await modelhost("account", "create", "bob", "--tier", "platinum")).stderr).toMatch(/No tier named "platinum"/);
    expect((await modelhost("account", "list")).stdout).toMatch(/^NAME\s+ID\s+TIER\s+STATUS/);
  });

  it("prints a new token once, alone on the last line; lists tokens without secrets; revokes by prefix", async () => {
    const created = await modelhost("token", "create", "--account", "alice", "--name", "laptop", "--expires", "7d");
    expect(created.code).toBe(0);
    const lines = created.stdout.trimEnd().split("\n");
    const secret = lines.at(-1)!;
    expect(secret).toMatch(/^mh_[A-Za-z0-9]{38}$/);
    expect(lines.slice(0, -1).join("\n")).not.toContain(secret.slice(10));
    const list = await modelhost("token", "list", "--account", "alice");
    expect(list.stdout).toContain(`${secret.slice(0, 10)}…`);
    expect(list.stdout).toContain("laptop");
    expect(list.stdout).not.toContain(secret.slice(10));
    expect((await modelhost("token", "revoke", secret.slice(0, 10))).stdout).toMatch(/revoked/);
    expect((await modelhost("token", "create", "--account", "alice", "--expires", "3d")).stderr).toMatch(/Invalid expiry "3d"/);
    expect((await modelhost("token", "create", "--account", "nobody")).code).toBe(2);
  });

  it("refuses a bad tiers file with one clear line and exit status 2, in serve and in the account commands", async () => {
    const tiersFile = path.join(dataDir, "bad-tiers.json");
    await writeFile(tiersFile, JSON.stringify({ tiers: { free: { rpm: 15 } } }));
    for (const command of [
      ["serve", "--profile", "hosted", "--port", "0", "--models-dir", modelsDir],
      ["account", "list"],
    ]) {
      const result = await modelhost(...command, "--tiers-file", tiersFile);
      expect(result.code, command[0]).toBe(2);
      expect(result.stderr.trim()).toMatch(/^modelhost: Invalid tiers file .*bad-tiers\.json: tiers\.free: /);
      expect(result.stderr).not.toMatch(/^\s+at /m);
    }
  });

  it("keeps every committed token and usage row through kill -9 of the server, and the CLI works beside it", async () => {
    await modelhost("account", "create", "crash");
    const first = (await modelhost("token", "create", "--account", "crash")).stdout.trimEnd().split("\n").at(-1)!;
    const server = await startServerProcess(["--profile", "hosted", "--models-dir", modelsDir, "--data-dir", dataDir]);
    // Tokens created by the CLI while the server runs, and requests completed, before the crash.
    const more: string[] = [];
    for (let i = 0; i < 3; i++) more.push((await modelhost("token", "create", "--account", "crash")).stdout.trimEnd().split("\n").at(-1)!);
    for (const token of [first, ...more]) expect((await chat(server.url, token)).status).toBe(200);
    // The usage table has a row per token; the REQUESTS column summed.
    const committed = async () =>
      [...(await modelhost("usage", "--account", "crash")).stdout.matchAll(/\stiny\s+\S+\s+(\d+)/g)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      );
    await expect.poll(committed).toBe(4);
    // Mid-load: requests in flight while the process dies.
    const inFlight = Array.from({ length: 8 }, () => chat(server.url, first).catch(() => undefined));
    await server.kill();
    await Promise.all(inFlight);

    const restarted = await startServerProcess(["--profile", "hosted", "--models-dir", modelsDir, "--data-dir", dataDir]);
    try {
      for (const token of [first, ...more]) expect((await chat(restarted.url, token)).status).toBe(200);
      expect(await committed()).toBeGreaterThanOrEqual(4);
      const integrity = await modelhost("usage");
      expect(integrity.code).toBe(0);
    } finally {
      expect(await restarted.stop()).toBe(0);
    }
  });
});
