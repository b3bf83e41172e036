import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { isServerError } from "../../src/core/ServerError.js";
import { ModelRegistry } from "../../src/engine/ModelRegistry.js";
import { modelFileParts } from "../../src/models/modelFiles.js";
import { readManifest } from "../../src/models/modelsManifest.js";
import type { PullProgress } from "../../src/core/ModelStore.js";
import { pullModel, type PullOptions } from "../../src/models/pullModel.js";
import { sha256, startFakeHub, type FakeHub } from "../support/fakeHub.js";
import { testModelPath } from "../support/testModels.js";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { loraAdapterWriter } from "../../src/testmodels/loraAdapterWriter.js";
import { presets, type LlamaPreset } from "../../src/testmodels/presets.js";
import { deleteModel } from "../../src/models/modelsManifest.js";

let hub: FakeHub;
let model: Buffer;
let projector: Buffer;
let adapter: Buffer;
let modelsDir: string;

/** A GGUF header with no tensors and no metadata: the later parts of a split model carry only tensors. */
const emptyGguf = Buffer.concat([Buffer.from("GGUF"), Buffer.from([3, 0, 0, 0]), Buffer.alloc(16)]);
/** Issue 28's 88 bytes: a GGUF header claiming 2^40 tensors and 2^40 keys. */
const hugeCounts = Buffer.alloc(88);
hugeCounts.write("GGUF", 0, "latin1");
hugeCounts.writeUInt32LE(3, 4);
hugeCounts.writeBigUInt64LE(1n << 40n, 8);
hugeCounts.writeBigUInt64LE(1n << 40n, 16);

beforeAll(async () => {
  model = await readFile(await testModelPath("tiny"));
  const projectorDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-pull-projector-"));
  await projectorWriter(TINY_PROJECTORS.mlp, 7).write(path.join(projectorDir, "mmproj.gguf"));
  projector = await readFile(path.join(projectorDir, "mmproj.gguf"));
  await loraAdapterWriter(presets.tiny as LlamaPreset, 1).write(path.join(projectorDir, "lora.gguf"));
  adapter = await readFile(path.join(projectorDir, "lora.gguf"));
  await rm(projectorDir, { recursive: true });
  const q8 = Buffer.concat([model, Buffer.alloc(4096, 7)]); // another file (another SHA-256), still a valid GGUF
  hub = await startFakeHub(
    {
      "test/Tiny-GGUF": [
        { path: "README.md", content: Buffer.from("# Tiny\n") },
        { path: "Tiny-Q8_0.gguf", content: q8 },
        { path: "Tiny-Q4_K_M.gguf", content: model },
      ],
      // A vision model: its projector in two precisions, named as ggml-org's repositories name them.
      "test/Vision-GGUF": [
        { path: "Vision-Q4_K_M.gguf", content: model },
        { path: "mmproj-model-bf16.gguf", content: Buffer.concat([projector, Buffer.alloc(64)]) },
        { path: "mmproj-model-f16.gguf", content: projector },
      ],
      "test/FakeVision-GGUF": [
        { path: "FakeVision-Q4_K_M.gguf", content: model },
        { path: "mmproj-model-f16.gguf", content: emptyGguf },
      ],
      // Served at /files/README.gguf: a page where a model was expected.
      "test/Page": [{ path: "README.gguf", content: Buffer.from("<html>Not here</html>") }],
      "test/Corrupt-GGUF": [
        {
          path: "Corrupt-Q4_K_M.gguf",
          content: model,
          corruptWith: Buffer.concat([model.subarray(0, 1000), Buffer.from("x"), model.subarray(1001)]),
        },
        { path: "Corrupt-Q8_0.gguf", content: model, corruptWith: Buffer.alloc(model.length), unlisted: true },
      ],
      "test/Split-GGUF": modelFileParts("Q8_0/Big-Q8_0-00001-of-00003.gguf").map((part, index) => ({
        path: part,
        content: index === 0 ? model : emptyGguf,
      })),
      "test/Tiny-LoRA-GGUF": [{ path: "tiny-sql-lora-f32.gguf", content: adapter }],
      "test/Gated-GGUF": [{ path: "Gated-Q4_K_M.gguf", content: model }],
      "test/Huge-GGUF": [{ path: "Huge-Q4_K_M.gguf", content: hugeCounts }],
      // A sound first part, and a second one whose header is cut short.
      "test/BadSplit-GGUF": modelFileParts("Bad-Q8_0-00001-of-00002.gguf").map((part, index) => ({
        path: part,
        content: index === 0 ? model : emptyGguf.subarray(0, 20),
      })),
    },
    { gated: { repos: ["test/Gated-GGUF"], token: "hf_accepted" } },
  );
});

afterAll(() => hub.close());

beforeEach(async () => {
  modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-pull-"));
  hub.requests.length = 0;
});

afterEach(() => rm(modelsDir, { recursive: true, force: true }));

function pull(reference: string, options: Partial<PullOptions> = {}) {
  const progress: PullProgress[] = [];
  const result = pullModel(reference, {
    modelsDir,
    hfEndpoint: hub.url,
    retryDelayMs: 10,
    onProgress: (event) => progress.push(event),
    ...options,
  });
  return { result, progress };
}

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isServerError(error)) throw new Error(`expected a ServerError, got ${String(error)}`);
  return { code: error.code, message: error.message };
}

describe("pulling a model from a hub", () => {
  it("downloads the quantization asked for, verifies it, names it, and lists it", async () => {
    const before = hub.bytesServed();
    const { result, progress } = pull("hf.co/test/Tiny-GGUF:Q4_K_M", { hfToken: "hf_secret", aliases: ["tiny"] });
    const pulled = await result;
    expect(pulled).toEqual({
      id: "hf.co/test/Tiny-GGUF:Q4_K_M",
      path: path.join(modelsDir, "Tiny-Q4_K_M.gguf"),
      downloadedBytes: model.length,
    });
    expect(hub.bytesServed() - before).toBe(model.length);
    expect(await readFile(pulled.path)).toEqual(model);

    // Nothing but the model and the manifest: no partial download, no lock.
    expect((await readdir(modelsDir)).sort()).toEqual(["Tiny-Q4_K_M.gguf", "models.json"]);
    expect((await readManifest(modelsDir)).entries).toEqual([
      {
        file: "Tiny-Q4_K_M.gguf",
        id: "hf.co/test/Tiny-GGUF:Q4_K_M",
        aliases: ["tiny"],
        adapters: [],
        source: `${hub.url}/test/Tiny-GGUF/Tiny-Q4_K_M.gguf`,
        sha256: sha256(model),
      },
    ]);
    const listed = await new ModelRegistry(modelsDir).list();
    expect(listed.map((entry) => [entry.id, entry.aliases])).toEqual([["hf.co/test/Tiny-GGUF:Q4_K_M", ["tiny"]]]);

    // Ollama's sequence of statuses, the layer named by its digest, the last count complete.
    const digest = `sha256:${sha256(model)}`;
    expect(progress[0]).toEqual({ status: "pulling manifest" });
    expect(progress.at(-1)).toEqual({ status: "success" });
    expect(progress.slice(-3).map((event) => event.status)).toEqual(["verifying sha256 digest", "writing manifest", "success"]);
    const layer = progress.filter((event) => event.digest === digest);
    expect(layer.length).toBeGreaterThan(0);
    expect(layer.every((event) => event.status === `pulling ${sha256(model).slice(0, 12)}` && event.total === model.length)).toBe(true);
    expect(layer.at(-1)?.completed).toBe(model.length);

    // The token went to the hub, never to the CDN the hub redirected to.
    expect(
      hub.requests.filter((request) => request.server === "hub").every((request) => request.authorization === "Bearer hf_secret"),
    ).toBe(true);
    expect(hub.requests.filter((request) => request.server === "cdn").map((request) => request.authorization)).toEqual([undefined]);

    // Pulled again: nothing is fetched, and another name for the same file becomes an alias.
    const again = await pull("test/Tiny-GGUF:q4_k_m").result;
    expect(again).toMatchObject({ id: "hf.co/test/Tiny-GGUF:Q4_K_M", downloadedBytes: 0 });
    expect(hub.bytesServed() - before).toBe(model.length);
    expect((await readManifest(modelsDir)).entries[0]?.aliases).toEqual(["tiny", "test/Tiny-GGUF:q4_k_m"]);
  });

  it("fetches a vision model's projector with it (F16 first), names it after the model, and pairs them in the manifest", async () => {
    const before = hub.bytesServed();
    const pulled = await pull("hf.co/test/Vision-GGUF").result;
    expect(pulled.downloadedBytes).toBe(model.length + projector.length);
    expect(hub.bytesServed() - before).toBe(model.length + projector.length);
    expect((await readdir(modelsDir)).sort()).toEqual(["Vision-Q4_K_M.gguf", "mmproj-Vision-Q4_K_M.gguf", "models.json"]);
    expect(await readFile(path.join(modelsDir, "mmproj-Vision-Q4_K_M.gguf"))).toEqual(projector);
    expect((await readManifest(modelsDir)).entries).toEqual([
      expect.objectContaining({ file: "Vision-Q4_K_M.gguf", projector: "mmproj-Vision-Q4_K_M.gguf" }),
    ]);
    // The projector is not a model: one model, which reads images through it.
    const listed = await new ModelRegistry(modelsDir).list();
    expect(listed.map((entry) => [entry.id, entry.projector])).toEqual([
      ["hf.co/test/Vision-GGUF", path.join(modelsDir, "mmproj-Vision-Q4_K_M.gguf")],
    ]);

    // A model pulled before projectors were fetched gets only its projector on the next pull.
    await rm(path.join(modelsDir, "mmproj-Vision-Q4_K_M.gguf"));
    const again = await pull("hf.co/test/Vision-GGUF").result;
    expect(again.downloadedBytes).toBe(projector.length);
    expect(hub.bytesServed() - before).toBe(model.length + 2 * projector.length);

    // Removing the model removes its projector.
    await deleteModel(modelsDir, pulled.path);
    expect((await readdir(modelsDir)).sort()).toEqual(["models.json"]);
  });

  it("refuses a repository's mmproj file that is no vision projector, installing nothing", async () => {
    const error = await failure(pull("hf.co/test/FakeVision-GGUF").result);
    expect(error.code).toBe("invalid_model_file");
    expect(error.message).toMatch(/mmproj file, is not a vision projector/);
    expect((await readdir(modelsDir)).filter((name) => name.endsWith(".gguf"))).toEqual([]);
  });

  it("picks Q4_K_M when no quantization is named, and takes a file name or URL", async () => {
    expect((await pull("hf.co/test/Tiny-GGUF").result).path).toBe(path.join(modelsDir, "Tiny-Q4_K_M.gguf"));
    // A reference that is no model name (a file in a repository, a URL) names the model after its file.
    const fromFile = await pull("hf.co/test/Tiny-GGUF/Tiny-Q8_0.gguf").result;
    expect(fromFile).toMatchObject({ id: "Tiny-Q8_0", path: path.join(modelsDir, "Tiny-Q8_0.gguf") });
    const url = `${hub.url}/files/Tiny-Q4_K_M.gguf`;
    // The same file name from another place does not replace the one already there.
    const fromUrl = await pull(url).result;
    expect(path.basename(fromUrl.path)).toMatch(/^[0-9a-f]{8}-Tiny-Q4_K_M\.gguf$/);
    expect(fromUrl.id).toBe(path.basename(fromUrl.path, ".gguf"));
    expect((await readManifest(modelsDir)).entries.find((entry) => entry.id === fromUrl.id)?.source).toBe(url);
    expect((await new ModelRegistry(modelsDir).list()).map((entry) => entry.id).sort()).toEqual(
      [fromUrl.id, "Tiny-Q8_0", "hf.co/test/Tiny-GGUF"].sort(),
    );
  });

  it("resumes a download whose connection dropped half-way, fetching no byte twice", async () => {
    const before = hub.bytesServed();
    hub.dropNextAfter(Math.floor(model.length / 2));
    const pulled = await pull("test/Tiny-GGUF:Q4_K_M").result;
    expect(await readFile(pulled.path)).toEqual(model);
    expect(hub.bytesServed() - before).toBe(model.length);
    const fetches = hub.requests.filter((request) => request.server === "cdn");
    expect(fetches.map((request) => request.range)).toEqual([undefined, `bytes=${Math.floor(model.length / 2)}-`]);
  });

  it("resumes after an interrupted pull (Ctrl-C), keeping what was downloaded", async () => {
    const before = hub.bytesServed();
    const half = Math.floor(model.length / 2);
    hub.stallNextAfter(half);
    const controller = new AbortController();
    const first = pull("test/Tiny-GGUF:Q4_K_M", {
      signal: controller.signal,
      onProgress: (event) => {
        if (event.completed === half) controller.abort(new Error("interrupted"));
      },
    });
    await expect(first.result).rejects.toThrow("interrupted");
    // The partial download is kept under a name the registry never lists.
    expect((await readdir(modelsDir)).filter((name) => name.endsWith(".partial"))).toHaveLength(1);
    expect(await new ModelRegistry(modelsDir).list()).toEqual([]);

    const second = await pull("test/Tiny-GGUF:Q4_K_M").result;
    expect(second.downloadedBytes).toBe(model.length - half);
    expect(await readFile(second.path)).toEqual(model);
    expect(hub.bytesServed() - before).toBe(model.length);
    expect((await readdir(modelsDir)).sort()).toEqual(["Tiny-Q4_K_M.gguf", "models.json"]);
  });

  it("rejects a download whose SHA-256 does not match, leaving nothing in the models directory", async () => {
    const error = await failure(pull("hf.co/test/Corrupt-GGUF:Q4_K_M").result);
    expect(error.code).toBe("download_failed");
    expect(error.message).toContain(`not the ${sha256(model)} the server publishes`);
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it("checks the X-Linked-Etag SHA-256 when the file list has none", async () => {
    const error = await failure(pull("hf.co/test/Corrupt-GGUF:Q8_0").result);
    expect(error.code).toBe("download_failed");
    expect(error.message).toContain(`not the ${sha256(model)} the server publishes`);
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it("says how to reach a gated repository, and pulls it with HF_TOKEN", async () => {
    const refused = await failure(pull("hf.co/test/Gated-GGUF:Q4_K_M").result);
    expect(refused).toEqual({
      code: "download_failed",
      message: expect.stringContaining("the repository is gated. Accept its terms on the hub, and set HF_TOKEN"),
    });
    const pulled = await pull("hf.co/test/Gated-GGUF:Q4_K_M", { hfToken: "hf_accepted" }).result;
    expect(await readFile(pulled.path)).toEqual(model);
  });

  it("pulls a LoRA adapter for a model it has, declaring it over that model, served as model+adapter", async () => {
    const missing = await failure(pull("hf.co/test/Tiny-LoRA-GGUF/tiny-sql-lora-f32.gguf", { adapterOf: "tiny" }).result);
    expect(missing.code).toBe("model_not_found");
    expect(await readdir(modelsDir)).toEqual([]);
    await pull("hf.co/test/Tiny-GGUF:Q4_K_M", { aliases: ["tiny"] }).result;
    const pulled = await pull("hf.co/test/Tiny-LoRA-GGUF/tiny-sql-lora-f32.gguf", { adapterOf: "tiny" }).result;
    expect(pulled.adapter).toBe("tiny+tiny-sql-lora-f32");
    const base = (await readManifest(modelsDir)).entries.find((entry) => entry.file === "Tiny-Q4_K_M.gguf");
    expect(base?.adapters).toEqual([{ file: "tiny-sql-lora-f32.gguf" }]);
    const listed = await new ModelRegistry(modelsDir).list();
    expect(listed.map((entry) => entry.id).sort()).toEqual([
      "hf.co/test/Tiny-GGUF:Q4_K_M",
      "hf.co/test/Tiny-GGUF:Q4_K_M+tiny-sql-lora-f32",
    ]);
    expect(listed.find((entry) => entry.id.endsWith("+tiny-sql-lora-f32"))?.aliases).toEqual(["tiny+tiny-sql-lora-f32"]);
    // Pulled again, it is declared once.
    await pull("hf.co/test/Tiny-LoRA-GGUF/tiny-sql-lora-f32.gguf", { adapterOf: "tiny" }).result;
    expect((await readManifest(modelsDir)).entries.find((entry) => entry.file === "Tiny-Q4_K_M.gguf")?.adapters).toHaveLength(1);
  });

  it("refuses a file that is not a GGUF model", async () => {
    const error = await failure(pull(`${hub.url}/files/README.gguf`).result);
    expect(error).toEqual({
      code: "invalid_model_file",
      message: `${hub.url}/files/README.gguf is not a GGUF model llama.cpp could load (the file does not begin with "GGUF" [bad_magic]); it was not installed.`,
    });
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it("names what a repository offers when the repository, quantization or file is unknown", async () => {
    const repo = await failure(pull("hf.co/test/Nothing-GGUF:Q4_K_M").result);
    expect(repo).toEqual({ code: "model_not_found", message: expect.stringContaining("The repository test/Nothing-GGUF does not exist") });
    const quant = await failure(pull("hf.co/test/Tiny-GGUF:Q5_K_S").result);
    expect(quant.code).toBe("model_not_found");
    expect(quant.message).toBe(
      'The repository test/Tiny-GGUF has no file in quantization "Q5_K_S". Available: Q4_K_M, Q8_0 (e.g. hf.co/test/Tiny-GGUF:Q4_K_M).',
    );
    const file = await failure(pull("hf.co/test/Tiny-GGUF/Tiny-F16.gguf").result);
    expect(file.message).toContain('has no file "Tiny-F16.gguf". Available: Q4_K_M, Q8_0');
    const syntax = await failure(pull("llama3.2").result);
    expect(syntax).toEqual({ code: "invalid_request", message: expect.stringContaining("Use hf.co/OWNER/REPO:QUANT") });
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it("refuses a malformed GGUF file, and any malformed part of a split model, before installing anything", async () => {
    const huge = await failure(pull("hf.co/test/Huge-GGUF:Q4_K_M").result);
    expect(huge.code).toBe("invalid_model_file");
    expect(huge.message).toMatch(
      /Huge-Q4_K_M\.gguf is not a GGUF model llama\.cpp could load \(key count 1099511627776 needs .* \[count_past_end\]\); it was not installed\./,
    );
    expect(await readdir(modelsDir)).toEqual([]);

    const split = await failure(pull("hf.co/test/BadSplit-GGUF:Q8_0").result);
    expect(split.code).toBe("invalid_model_file");
    expect(split.message).toMatch(/Bad-Q8_0-00002-of-00002\.gguf is not a GGUF model .*\[truncated\]/);
    // The first part, downloaded and sound, waits as a partial file: no part was renamed into place.
    expect((await readdir(modelsDir)).filter((name) => name.endsWith(".gguf"))).toEqual([]);
  });

  it("pulls every part of a split model, and lists it once", async () => {
    const pulled = await pull("hf.co/test/Split-GGUF:Q8_0").result;
    expect((await readdir(modelsDir)).sort()).toEqual([
      "Big-Q8_0-00001-of-00003.gguf",
      "Big-Q8_0-00002-of-00003.gguf",
      "Big-Q8_0-00003-of-00003.gguf",
      "models.json",
    ]);
    expect(pulled.downloadedBytes).toBe(model.length + 2 * emptyGguf.length);
    const listed = await new ModelRegistry(modelsDir).list();
    expect(listed.map((entry) => entry.id)).toEqual(["hf.co/test/Split-GGUF:Q8_0"]);
  });

  it("refuses to start when the disk is too full, before fetching anything", async () => {
    const before = hub.bytesServed();
    const error = await failure(pull("hf.co/test/Tiny-GGUF:Q4_K_M", { statfs: async () => ({ bavail: 10, bsize: 4096 }) }).result);
    expect(error.code).toBe("insufficient_storage");
    expect(error.message).toMatch(/needs 322\.5 KiB more, and 40\.0 KiB is free/);
    expect(hub.bytesServed()).toBe(before);
    expect(await readdir(modelsDir)).toEqual([]);
  });
});
