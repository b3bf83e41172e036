import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { settings } from "../../src/config/settings.js";
import { testModelPath } from "../support/testModels.js";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");
const run = promisify(execFile);

async function modelhost(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("the modelhost command", () => {
  let modelsDir: string;

  beforeAll(async () => {
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-cli-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterAll(() => rm(modelsDir, { recursive: true, force: true }));

  it("prints every serve option with its default and variable in --help", async () => {
    for (const args of [["--help"], ["serve", "--help"]]) {
      const { code, stdout } = await modelhost(...args);
      expect(code).toBe(0);
      for (const spec of Object.values(settings).filter((setting) => setting.commands.includes("serve"))) {
        expect(stdout).toContain(`--${spec.flag}`);
        expect(stdout).toContain(`default: ${spec.default}   env: ${spec.env}`);
      }
    }
  });

  it("refuses bad options with exit code 2 and a message naming them", async () => {
    const badValue = await modelhost("serve", "--port", "eighty");
    expect(badValue.code).toBe(2);
    expect(badValue.stderr).toContain("--port");
    const unknown = await modelhost("serve", "--colour", "blue");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("--colour");
    expect((await modelhost("frobnicate")).code).toBe(2);
  });

  it("lists installed models", async () => {
    const { code, stdout } = await modelhost("models", "--models-dir", modelsDir);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ID\s+ALIASES\s+ARCH/);
    expect(stdout).toMatch(/\ntiny\s+-\s+llama\s/);
  });

  it("serves until SIGTERM, then exits cleanly", async () => {
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--models-dir", modelsDir, "--threads", "1"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let output = "";
        child.stdout.on("data", (data: Buffer) => {
          output += data.toString();
          const match = /"url":"(http:\/\/[^"]+)".*"msg":"modelhost listening"/.exec(output);
          if (match?.[1]) resolve(match[1]);
        });
        child.once("exit", () => reject(new Error(`server exited early: ${output}`)));
      });
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
      expect((await client.models.list()).data.map((model) => model.id)).toEqual(["tiny"]);
      const reply = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 3 });
      expect(reply.usage?.completion_tokens).toBe(3);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });

  it("writes test models", async () => {
    const out = path.join(modelsDir, "made.gguf");
    const { code, stdout } = await modelhost("make-test-model", "--preset", "tiny", "--out", out);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Wrote .*made\.gguf: [\d,]+ parameters/);
    const { stdout: listing } = await modelhost("models", "--models-dir", modelsDir);
    expect(listing).toMatch(/\nmade\s/);
  });
});
