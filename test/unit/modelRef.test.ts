import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/loadConfig.js";
import { chooseRepoFiles } from "../../src/models/chooseRepoFiles.js";
import { parseModelRef } from "../../src/models/modelRef.js";

describe("parseModelRef", () => {
  it.each([
    ["hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", { repo: "bartowski/Qwen2.5-0.5B-Instruct-GGUF", quant: "Q4_K_M" }],
    ["huggingface.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF", { repo: "bartowski/Qwen2.5-0.5B-Instruct-GGUF" }],
    ["bartowski/Qwen2.5-0.5B-Instruct-GGUF:iq3_m", { repo: "bartowski/Qwen2.5-0.5B-Instruct-GGUF", quant: "iq3_m" }],
    ["hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:latest", { repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF" }],
    [
      "hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf",
      { repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF", file: "qwen2.5-0.5b-instruct-q4_k_m.gguf" },
    ],
    ["hf.co/o/r/Q8_0/m-00001-of-00002.gguf", { repo: "o/r", file: "Q8_0/m-00001-of-00002.gguf" }],
    ["hf.co/o/r:m-Q8_0.gguf", { repo: "o/r", file: "m-Q8_0.gguf" }],
    ["https://huggingface.co/o/r/blob/main/m%20x.gguf", { repo: "o/r", file: "m x.gguf" }],
  ])("reads %s as a hub reference", (input, expected) => {
    expect(parseModelRef(input)).toEqual({ kind: "hub", name: input, ...expected });
  });

  it("reads a URL of a .gguf file, and refuses what it cannot pull", () => {
    expect(parseModelRef("https://example.com/models/m.gguf?x=1")).toEqual({
      kind: "url",
      name: "https://example.com/models/m.gguf?x=1",
      url: "https://example.com/models/m.gguf?x=1",
    });
    expect(() => parseModelRef("https://example.com/models/m.bin")).toThrow(/does not name a \.gguf file/);
    expect(() => parseModelRef("ftp://example.com/m.gguf")).toThrow(/Only https:\/\//);
    expect(() => parseModelRef("llama3.2:1b")).toThrow(/is not a model reference modelhost can pull/);
  });
});

describe("chooseRepoFiles", () => {
  const file = (path: string) => ({ path, size: 1 });
  const repo = [
    file("README.md"),
    file("m-Q8_0.gguf"),
    file("m-IQ3_XS.gguf"),
    file("m-UD-Q4_K_XL.gguf"),
    file("mmproj-m-F16.gguf"),
    file("m.Q2_K.gguf"),
  ];

  it("matches a quantization case-insensitively, and prefers Q4_K_M, then Q8_0, then the first file", () => {
    expect(chooseRepoFiles("o/r", repo, { quant: "iq3_xs" })).toEqual([file("m-IQ3_XS.gguf")]);
    expect(chooseRepoFiles("o/r", repo, { quant: "Q2_K" })).toEqual([file("m.Q2_K.gguf")]);
    expect(chooseRepoFiles("o/r", repo, { quant: "UD-Q4_K_XL" })).toEqual([file("m-UD-Q4_K_XL.gguf")]);
    expect(chooseRepoFiles("o/r", repo, {})).toEqual([file("m-Q8_0.gguf")]);
    expect(chooseRepoFiles("o/r", [...repo, file("m-Q4_K_M.gguf")], {})).toEqual([file("m-Q4_K_M.gguf")]);
    expect(chooseRepoFiles("o/r", [file("b-F16.gguf"), file("a-BF16.gguf")], {})).toEqual([file("a-BF16.gguf")]);
  });

  it("takes every part of a split model, and offers none that lacks a part", () => {
    const parts = [file("Q8_0/m-Q8_0-00002-of-00002.gguf"), file("Q8_0/m-Q8_0-00001-of-00002.gguf"), file("m-Q6_K-00001-of-00002.gguf")];
    expect(chooseRepoFiles("o/r", parts, { quant: "Q8_0" })).toEqual([
      file("Q8_0/m-Q8_0-00001-of-00002.gguf"),
      file("Q8_0/m-Q8_0-00002-of-00002.gguf"),
    ]);
    expect(chooseRepoFiles("o/r", parts, { file: "m-Q8_0-00002-of-00002.gguf" })).toHaveLength(2);
    expect(() => chooseRepoFiles("o/r", parts, { quant: "Q6_K" })).toThrow(
      'no file in quantization "Q6_K". Available: Q8_0 (e.g. hf.co/o/r:Q8_0)',
    );
  });

  it("says when a repository has no GGUF file, or several files match", () => {
    expect(() => chooseRepoFiles("o/r", [file("model.safetensors")], {})).toThrow("The repository o/r has no GGUF model files.");
    expect(() => chooseRepoFiles("o/r", [file("a-Q8_0.gguf"), file("b-Q8_0.gguf")], { quant: "Q8_0" })).toThrow(
      /Several files of o\/r are in quantization "Q8_0": a-Q8_0\.gguf, b-Q8_0\.gguf/,
    );
  });
});

describe("the hub endpoint setting", () => {
  it("takes an http(s) URL without its trailing slash", () => {
    expect(loadConfig({ env: { MODELHOST_HF_ENDPOINT: "https://hf-mirror.example/" } }).hfEndpoint).toBe("https://hf-mirror.example");
    expect(() => loadConfig({ env: { MODELHOST_HF_ENDPOINT: "ftp://x" } })).toThrow(/MODELHOST_HF_ENDPOINT/);
  });
});
