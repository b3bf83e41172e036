import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { isValidModelName } from "../../src/core/modelName.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

// Model names as they enter through the native API (issue 28, finding 5): a new name must fit the
// grammar (400 in Ollama's error shape otherwise), and nothing a name, a pulled URL or an entry of
// models.json says can make the server touch a file outside its models directory.

/** Every name of the finding, each of which /api/copy used to accept with a 200. */
const reported = [
  "../escaped",
  "..%2fescaped",
  "a/../../escaped",
  "a\\..\\..\\escaped",
  "/tmp/escaped",
  "..",
  ".",
  "bad\u0000name",
  "x".repeat(300),
  "NUL",
  "con.gguf",
];

/** Names built from path syntax, separators, dots, device names and odd characters. */
const hostileName: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(...reported, "C:\\escaped", "a/./b", ".hidden", "COM1.txt", "lpt9", "a/b/c/d", "x:y:z", "localhost:5000/m"),
  },
  {
    weight: 5,
    arbitrary: fc
      .array(
        fc.constantFrom(
          "..",
          ".",
          "/",
          "\\",
          "%2f",
          "%2e%2e",
          ":",
          "\u0000",
          "a",
          "escaped",
          "nul",
          "con.gguf",
          " ",
          "~",
          "C:",
          "model.gguf",
        ),
        { minLength: 1, maxLength: 8 },
      )
      .map((parts) => parts.join("")),
  },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom("a", ".", "/", ":"), minLength: 100, maxLength: 400 }) },
);

/** Names, sizes and contents of every file below `directory`, except `skip`. */
async function snapshot(directory: string, skip: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(directory, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (file === skip || file.startsWith(`${skip}${path.sep}`) || !entry.isFile()) continue;
    files[path.relative(directory, file)] = (await readFile(file)).toString("base64");
  }
  return files;
}

describe("model names through the native API", () => {
  let root: string;
  let modelsDir: string;
  let server: TestServer;
  let model: Buffer;
  /** A plain web server that answers any .gguf path with the model (for pulls by URL). */
  let files: Server;
  let filesUrl: string;
  let fileRequests = 0;

  const post = (route: string, body: unknown, method = "POST") =>
    fetch(`${server.url}${route}`, { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  beforeAll(async () => {
    model = await readFile(await testModelPath("tiny"));
    root = await mkdtemp(path.join(os.tmpdir(), "modelhost-names-"));
    modelsDir = path.join(root, "models");
    await mkdir(modelsDir);
    await copyFile(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
    // What an escape would hit: files beside and above the models directory.
    await writeFile(path.join(root, "escaped"), "outside");
    await writeFile(path.join(root, "victim.gguf"), model);
    files = createServer((request, response) => {
      fileRequests++;
      if (!request.url?.endsWith(".gguf")) return void response.writeHead(404).end();
      response.writeHead(200, { "content-length": model.length }).end(model);
    });
    await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    server = await startTestServer({ models: {}, config: { modelsDir, contextSize: 256, allowHttpPull: true } });
  });

  afterAll(async () => {
    await server?.close();
    await new Promise((resolve) => files?.close(resolve));
    await rm(root, { recursive: true, force: true });
  });

  beforeEach(() => {
    fileRequests = 0;
  });

  it.each(reported.map((name) => [JSON.stringify(name.length > 40 ? `${name.slice(0, 10)}…` : name), name]))(
    "refuses %s as /api/copy's destination with a 400 in Ollama's shape, naming nothing new",
    async (_, destination) => {
      const response = await post("/api/copy", { source: "tiny", destination });
      expect(response.status).toBe(400);
      const body = (await response.json()) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(["error"]);
      expect(body.error).toMatch(/^Invalid value for 'destination': /);
      const tags = (await (await fetch(`${server.url}/api/tags`)).json()) as { models: { name: string }[] };
      expect(tags.models.map((entry) => entry.name)).toEqual(["tiny:latest"]);
    },
  );

  it("still copies to, and deletes, valid names of every form", async () => {
    for (const destination of [
      "qwen2.5:0.5b",
      "llama3.2",
      "hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
      "Llama-3.2-1B-Instruct-Q4_K_M",
    ]) {
      expect((await post("/api/copy", { source: "tiny", destination })).status).toBe(200);
      expect((await post("/api/delete", { model: destination }, "DELETE")).status).toBe(200);
    }
    expect(await readdir(modelsDir)).toContain("tiny.gguf");
  });

  it("refuses hostile names to /api/delete and /api/create with a 400", async () => {
    for (const name of reported) {
      const deleted = await post("/api/delete", { model: name }, "DELETE");
      expect(deleted.status).toBe(400);
      expect(Object.keys((await deleted.json()) as object)).toEqual(["error"]);
      expect((await post("/api/create", { model: name })).status).toBe(400);
    }
    expect((await post("/api/create", { model: "fine" })).status).toBe(501);
  });

  it("refuses a pulled URL whose file name decodes to a path, fetching nothing", async () => {
    for (const file of [
      "..%2Fvictim.gguf",
      "..%2F..%2Fescaped.gguf",
      "a%2F..%2F..%2Fpulled.gguf",
      "..%5Cpulled.gguf",
      "%2E%2E.gguf%00",
      "%2Fabs.gguf",
    ]) {
      const response = await post("/api/pull", { model: `${filesUrl}/dir/${file}`, stream: false });
      expect(response.status, file).toBe(400);
      expect(Object.keys((await response.json()) as object)).toEqual(["error"]);
    }
    expect(fileRequests).toBe(0);
    expect((await readdir(root)).sort()).toEqual(["escaped", "models", "victim.gguf"]);
  });

  it("lists no model outside the directory from models.json, so deleting it cannot reach there", async () => {
    const victim = path.join(root, "victim.gguf");
    await writeFile(
      path.join(modelsDir, "models.json"),
      JSON.stringify({
        models: [
          { file: "../victim.gguf", id: "victim" },
          { file: victim, id: "absolute" },
          { file: "tiny.gguf", aliases: ["../escaped", "tiny-alias"] },
        ],
      }),
    );
    try {
      const tags = (await (await fetch(`${server.url}/api/tags`)).json()) as { models: { name: string }[] };
      expect(tags.models.map((entry) => entry.name).sort()).toEqual(["tiny-alias:latest", "tiny:latest"]);
      for (const name of ["victim", "absolute"]) expect((await post("/api/delete", { model: name }, "DELETE")).status).toBe(404);
      expect((await stat(victim)).size).toBe(model.length);
    } finally {
      await rm(path.join(modelsDir, "models.json"), { force: true });
    }
  });

  it("never changes a file outside the models directory, whatever the names (property)", async () => {
    const outside = await snapshot(root, modelsDir);
    await fc.assert(
      fc.asyncProperty(hostileName, fc.constantFrom("copy", "delete", "create", "pull", "manifest"), async (name, operation) => {
        if (name === "tiny" || name === "tiny:latest") return;
        const valid = isValidModelName(name);
        let status: number;
        if (operation === "copy") status = (await post("/api/copy", { source: "tiny", destination: name })).status;
        else if (operation === "delete") status = (await post("/api/delete", { model: name }, "DELETE")).status;
        else if (operation === "create") status = (await post("/api/create", { model: name })).status;
        else if (operation === "pull") {
          status = (await post("/api/pull", { model: `${filesUrl}/${encodeURIComponent(name)}.gguf`, stream: false })).status;
          // A name that is a plain file name is pulled, into the directory: remove it for the next run.
          for (const file of await readdir(modelsDir)) if (file !== "tiny.gguf") await rm(path.join(modelsDir, file), { force: true });
        } else {
          await writeFile(
            path.join(modelsDir, "models.json"),
            JSON.stringify({ models: [{ file: `${name}.gguf`, id: name, aliases: [name] }] }),
          );
          await fetch(`${server.url}/api/tags`);
          status = (await post("/api/delete", { model: name }, "DELETE")).status;
          await rm(path.join(modelsDir, "models.json"), { force: true });
        }
        if (!valid && operation !== "pull" && operation !== "manifest") expect(status).toBe(400);
        if (valid && operation === "copy") {
          expect(status).toBe(200);
          expect((await post("/api/delete", { model: name }, "DELETE")).status).toBe(200);
        }
        expect(await snapshot(root, modelsDir)).toEqual(outside);
        expect((await stat(path.join(modelsDir, "tiny.gguf"))).size).toBe(model.length);
      }),
      { numRuns: 150 },
    );
  });
});
