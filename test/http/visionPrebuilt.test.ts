import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { encodePng } from "../support/images.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const run = promisify(execFile);
const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

/**
 * Issue 33 on node-llama-cpp's prebuilt binary, which lacks llama.cpp's image support (tools/mtmd):
 * a vision model still lists as one and answers text, and a request with an image gets a 400 that
 * names the way out (`modelhost engine build`), as `engine status` does. test/engine/vision.test.ts
 * covers images on the native build.
 */
describe("a vision model on the prebuilt engine", () => {
  let dir: string;
  let server: TestServer;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-vision-prebuilt-"));
    const projector = path.join(dir, "mmproj.gguf");
    await projectorWriter(TINY_PROJECTORS.mlp, 7).write(projector);
    server = await startTestServer({
      models: { "tiny-vision": await testModelPath("tiny"), "mmproj-tiny-vision-f16": projector },
      config: { engine: "prebuilt" },
    });
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("lists it as reading images and answers text, but refuses an image with a 400 naming `modelhost engine build`", async () => {
    const model = (await server.client.models.list()).data.find((each) => each.id === "tiny-vision");
    expect((model as unknown as { capabilities: string[] }).capabilities).toContain("vision");
    const text = await server.client.chat.completions.create({
      model: "tiny-vision",
      max_tokens: 4,
      messages: [{ role: "user", content: "Hi" }],
    });
    expect(text.choices[0]!.finish_reason).toBe("length");
    const url = `data:image/png;base64,${encodePng(8, 8, () => [200, 10, 10]).toString("base64")}`;
    const response = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny-vision",
      messages: [
        {
          role: "user",
          content: [
            { type: "image_url", image_url: { url } },
            { type: "text", text: "What is it?" },
          ],
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      error: {
        type: "invalid_request_error",
        param: "messages[0].content[0].image_url.url",
        message: expect.stringContaining("Run `modelhost engine build`"),
      },
    });
  });

  it("is what `engine status` reports for the prebuilt binary", async () => {
    const { stdout } = await run(process.execPath, [bin, "engine", "status", "--engine", "prebuilt"]);
    expect(stdout).toMatch(/^images: no \(this binary lacks llama\.cpp's mtmd: run `modelhost engine build`\)$/m);
  });
});
