// Tiny generated models that carry real model families' chat templates (llama.cpp's
// models/templates, from the source node-llama-cpp ships, and test/fixtures/templates for the
// families llama.cpp ships none of), served: what the family tests share.
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { makeTestModel, type MakeTestModelOptions } from "../../src/testmodels/makeTestModel.js";
import { llamaCppSource } from "./llamaCppSource.js";
import { startTestServer, type TestServer, type TestServerOptions } from "./startTestServer.js";

/** A served model: its template's file in models/templates, and what else makeTestModel is to write. */
export interface FamilyModel extends Omit<MakeTestModelOptions, "preset" | "out" | "chatTemplate"> {
  template: string;
  preset?: MakeTestModelOptions["preset"];
}

const ownTemplates = path.resolve(import.meta.dirname, "../fixtures/templates");

/** The text of a family's template (`Qwen-Qwen3-0.6B.jinja`): llama.cpp's, or ours where it ships none. */
export async function familyTemplate(file: string): Promise<string> {
  const own = path.join(ownTemplates, file);
  if (existsSync(own)) return readFile(own, "utf8");
  return readFile(path.join(await llamaCppSource(), "models/templates", file), "utf8");
}

/**
 * Writes each model (the tiny preset unless it says) with its family's template into a folder of
 * its own and serves them; close() stops the server and removes the folder.
 */
export async function serveFamilies(models: Record<string, FamilyModel>, config?: TestServerOptions["config"]): Promise<TestServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-families-"));
  try {
    const files: Record<string, string> = {};
    for (const [name, { template, preset = "tiny", ...options }] of Object.entries(models)) {
      const chatTemplate = await familyTemplate(template);
      files[name] = (await makeTestModel({ preset, out: path.join(dir, `${name}.gguf`), chatTemplate, ...options })).path;
    }
    const server = await startTestServer({ models: files, ...(config ? { config } : {}) });
    return {
      ...server,
      async close() {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** A family's name as a model name (`Qwen3-Coder` → `qwen3-coder`), with an optional prefix. */
export function familyModelName(family: string, prefix = ""): string {
  return prefix + family.toLowerCase().replaceAll(/[^a-z0-9]+/g, "-");
}
