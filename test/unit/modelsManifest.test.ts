import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultModelId, isListedModelFile, modelFileParts, splitPartOf } from "../../src/models/modelFiles.js";
import {
  addAlias,
  deleteModel,
  MANIFEST_FILE,
  nameModel,
  readManifest,
  removeAlias,
  updateManifest,
} from "../../src/models/modelsManifest.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), "modelhost-manifest-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

const manifestText = () => readFile(path.join(directory, MANIFEST_FILE), "utf8");
const manifestJson = async () => JSON.parse(await manifestText()) as { models: Record<string, unknown>[] };
const touch = (name: string) => writeFile(path.join(directory, name), "GGUF");

describe("model files", () => {
  it("names split parts, default ids and which files are listed", () => {
    expect(splitPartOf("m-00002-of-00003.gguf")).toEqual({ part: 2, count: 3 });
    expect(splitPartOf("m.gguf")).toBeUndefined();
    expect(modelFileParts("m-00002-of-00003.gguf")).toEqual(["m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]);
    expect(modelFileParts("sub/m.gguf")).toEqual(["sub/m.gguf"]);
    expect(defaultModelId("/x/Qwen-Q4_K_M-00001-of-00002.gguf")).toBe("Qwen-Q4_K_M");
    expect(
      ["a.gguf", "a-00001-of-00002.gguf", "a-00002-of-00002.gguf", ".a.gguf", "a.gguf.partial", "models.json"].filter(isListedModelFile),
    ).toEqual(["a.gguf", "a-00001-of-00002.gguf"]);
  });
});

describe("models.json", () => {
  it("reads a missing manifest as empty and describes a broken one instead of throwing", async () => {
    expect(await readManifest(directory)).toEqual({ entries: [] });
    await writeFile(path.join(directory, MANIFEST_FILE), "{ not json");
    expect((await readManifest(directory)).problem).toMatch(/JSON/);
    await writeFile(path.join(directory, MANIFEST_FILE), JSON.stringify({ models: [{ id: "x" }] }));
    expect((await readManifest(directory)).problem).toMatch(/^models\.0\.file/);
  });

  it("adds a model with an id and aliases, then an alias, then removes the alias", async () => {
    await touch("qwen-q4_k_m.gguf");
    await nameModel(directory, { file: path.join(directory, "qwen-q4_k_m.gguf"), id: "hf.co/o/qwen:Q4_K_M", aliases: ["qwen"] });
    expect(await manifestJson()).toEqual({ models: [{ file: "qwen-q4_k_m.gguf", id: "hf.co/o/qwen:Q4_K_M", aliases: ["qwen"] }] });

    await addAlias(directory, "qwen-q4_k_m.gguf", "gpt-4o-mini");
    expect((await readManifest(directory)).entries[0]?.aliases).toEqual(["qwen", "gpt-4o-mini"]);

    expect(await removeAlias(directory, "qwen")).toBe(true);
    expect(await removeAlias(directory, "qwen")).toBe(false);
    expect((await readManifest(directory)).entries[0]?.aliases).toEqual(["gpt-4o-mini"]);
    // Written atomically: no temporary or lock file is left beside it.
    expect((await readdir(directory)).sort()).toEqual([MANIFEST_FILE, "qwen-q4_k_m.gguf"]);
  });

  it("gives a file without an entry an alias and keeps its file-name id", async () => {
    await touch("tiny.gguf");
    await addAlias(directory, "tiny.gguf", "tiny:latest");
    expect(await manifestJson()).toEqual({ models: [{ file: "tiny.gguf", aliases: ["tiny:latest"] }] });
  });

  it("refuses a name another model answers to, by manifest or by file name", async () => {
    await touch("a.gguf");
    await touch("b.gguf");
    await touch("c.gguf");
    await nameModel(directory, { file: "a.gguf", id: "alpha", aliases: ["first"] });
    await expect(addAlias(directory, "b.gguf", "first")).rejects.toThrow(/"first" is already used by another model \(a\.gguf\)/);
    await expect(nameModel(directory, { file: "b.gguf", id: "alpha" })).rejects.toThrow(/already used/);
    await expect(addAlias(directory, "b.gguf", "c")).rejects.toThrow(/"c" is already used by another model \(c\.gguf\)/);
    // A model may be given a name it already has.
    await nameModel(directory, { file: "a.gguf", id: "alpha", aliases: ["first"] });
    expect((await readManifest(directory)).entries).toEqual([{ file: "a.gguf", id: "alpha", aliases: ["first"], adapters: [] }]);
  });

  it("keeps keys it does not know and refuses to overwrite a broken manifest", async () => {
    await writeFile(path.join(directory, MANIFEST_FILE), JSON.stringify({ note: "mine", models: [{ file: "a.gguf", context: 2048 }] }));
    await addAlias(directory, "a.gguf", "a2");
    expect(await manifestJson()).toEqual({ models: [{ file: "a.gguf", aliases: ["a2"], context: 2048 }] });

    const broken = '{"models": [';
    await writeFile(path.join(directory, MANIFEST_FILE), broken);
    await expect(addAlias(directory, "a.gguf", "a3")).rejects.toThrow(/models\.json in the models directory is not valid/);
    expect(await manifestText()).toBe(broken);
  });

  it("deletes a model's file, every part of a split model, and its entry", async () => {
    for (const part of modelFileParts("big-00001-of-00003.gguf")) await touch(part);
    await touch("other.gguf");
    await nameModel(directory, { file: "big-00001-of-00003.gguf", id: "big", aliases: ["b"] });
    await nameModel(directory, { file: "other.gguf", id: "other" });

    await deleteModel(directory, path.join(directory, "big-00001-of-00003.gguf"));
    expect((await readdir(directory)).sort()).toEqual([MANIFEST_FILE, "other.gguf"]);
    expect((await readManifest(directory)).entries).toEqual([{ file: "other.gguf", id: "other", aliases: [], adapters: [] }]);
  });

  it("leaves out, with a warning, an entry whose file is not in the directory, and names that are not model names", async () => {
    const models = [
      { file: "../outside.gguf", id: "outside" },
      { file: "/etc/outside.gguf", id: "absolute" },
      { file: "sub/inside.gguf", id: "nested" },
      { file: "..", id: "dots" },
      { file: ".hidden.gguf", id: "hidden" },
      { file: "nul.gguf", id: "device" },
      { file: "good.gguf", id: "../escaped", aliases: ["fine", "a\\..\\..\\escaped", "NUL", "x".repeat(300), "ok:v1"] },
    ];
    await writeFile(path.join(directory, MANIFEST_FILE), JSON.stringify({ models }));
    const read = await readManifest(directory);
    expect(read.entries).toEqual([{ file: "good.gguf", aliases: ["fine", "ok:v1"], adapters: [] }]);
    expect(read.warnings).toHaveLength(10);
    expect(read.warnings?.[0]).toBe(
      'models.json: models.0 is skipped: its file "../outside.gguf" is not a plain file name in the models directory.',
    );
    expect(read.warnings).toContain(
      "models.json: models.6.id is ignored: a model name is [host/][namespace/]name[:tag] of letters, digits, '.', '_' and '-', each part beginning with a letter or a digit.",
    );
    // A rewrite keeps what the person wrote, checked or not.
    await addAlias(directory, "good.gguf", "more");
    expect((await manifestJson()).models).toHaveLength(models.length);
  });

  it("keeps a model's adapters in their order, marking with a warning one outside the directory or with a name that cannot follow `base+`", async () => {
    const adapters = [
      { file: "a.gguf", name: "sql", scale: 0.5 },
      { file: "../b.gguf", name: "escape" },
      { file: "c.gguf", name: "team/x" },
      { file: "d-lora.gguf" },
    ];
    await writeFile(path.join(directory, MANIFEST_FILE), JSON.stringify({ models: [{ file: "base.gguf", adapters }] }));
    const read = await readManifest(directory);
    // In place, since a request's `lora` ids are positions in the list.
    expect(read.entries[0]?.adapters).toEqual([
      adapters[0],
      { ...adapters[1], problem: 'its file "../b.gguf" is not a plain file name in the models directory' },
      { ...adapters[2], problem: `its name "team/x" is not valid (an adapter's name has no '/' or ':')` },
      adapters[3],
    ]);
    expect(read.warnings).toEqual([
      'models.json: models.0.adapters.1 is not served: its file "../b.gguf" is not a plain file name in the models directory.',
      `models.json: models.0.adapters.2 is not served: its name "team/x" is not valid (an adapter's name has no '/' or ':').`,
    ]);
    // A rewrite keeps them as written.
    await addAlias(directory, "base.gguf", "more");
    expect((await manifestJson()).models).toEqual([{ file: "base.gguf", aliases: ["more"], adapters }]);
  });

  it("never names or deletes a file outside the directory, and refuses names outside the grammar", async () => {
    const outside = await mkdtemp(path.join(os.tmpdir(), "modelhost-outside-"));
    try {
      await writeFile(path.join(outside, "victim.gguf"), "GGUF");
      await expect(deleteModel(directory, path.join(outside, "victim.gguf"))).rejects.toThrow(/must be a file in the models directory/);
      await expect(deleteModel(directory, "../victim.gguf")).rejects.toThrow(/must be a file in the models directory/);
      await expect(nameModel(directory, { file: path.join(outside, "victim.gguf"), id: "victim" })).rejects.toThrow(
        /must be a file in the models directory/,
      );
      expect(await readdir(outside)).toEqual(["victim.gguf"]);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
    await touch("a.gguf");
    for (const name of ["../escaped", "con.gguf", "bad\u0000name", ".", ""]) {
      await expect(addAlias(directory, "a.gguf", name)).rejects.toMatchObject({ code: "invalid_request" });
      await expect(nameModel(directory, { file: "a.gguf", id: name })).rejects.toMatchObject({ code: "invalid_request" });
    }
    expect(await readdir(directory)).toEqual(["a.gguf"]);
  });

  it("keeps every change made concurrently", async () => {
    await touch("a.gguf");
    await Promise.all(Array.from({ length: 20 }, (_, i) => addAlias(directory, "a.gguf", `alias-${i}`)));
    expect((await readManifest(directory)).entries[0]?.aliases).toHaveLength(20);
  });

  it("takes over a lock file left by a process that died", async () => {
    // PIDs above the kernel's pid_max (4194304 at most) never belong to a live process.
    await writeFile(path.join(directory, `.${MANIFEST_FILE}.lock`), "99999999");
    await updateManifest(directory, (entries) => void entries.push({ file: "a.gguf", aliases: [], adapters: [] }));
    expect(await manifestJson()).toEqual({ models: [{ file: "a.gguf" }] });
  });
});
