import { describe, expect, it } from "vitest";
import { assertModelName, isValidModelName, MAX_NAME_LENGTH, modelNameProblem } from "../../src/core/modelName.js";
import { isServerError } from "../../src/core/ServerError.js";
import { defaultModelId, isPlainFileName } from "../../src/models/modelFiles.js";

const valid = [
  "qwen2.5:0.5b",
  "llama3.2",
  "llama3.2:latest",
  "hf.co/owner/repo:Q4_K_M",
  "hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
  "huggingface.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF",
  "bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
  "Llama-3.2-1B-Instruct-Q4_K_M",
  "my-embedder:v1",
  "gpt-4o-mini",
  "nomic-embed-text",
  "a_b",
  "x",
  "9",
  "console",
  "nullable",
  "comet:com10",
  "a".repeat(128),
  `${"a".repeat(100)}/${"b".repeat(100)}:${"c".repeat(53)}`,
];

/** Every name of issue 28's finding 5, and more of their kind. */
const invalid = [
  "",
  "../escaped",
  "..%2fescaped",
  "a/../../escaped",
  "a\\..\\..\\escaped",
  "/etc/passwd",
  "/tmp/escaped",
  "C:\\Windows\\escaped",
  "C:/escaped",
  "..",
  ".",
  "a/./b",
  "a/../b",
  ".hidden",
  "a/.hidden",
  "a..b",
  "a.",
  "model:.",
  "model:..",
  "bad\u0000name",
  "tab\tname",
  "new\nline",
  "a".repeat(300),
  "a".repeat(129),
  `${"a".repeat(100)}/${"b".repeat(100)}:${"c".repeat(54)}`,
  "NUL",
  "nul",
  "con.gguf",
  "CON",
  "Prn",
  "aux.txt",
  "COM1",
  "com9.gguf",
  "LPT1",
  "lpt9",
  "hf.co/NUL/model",
  "host/ns/con",
  "model:nul",
  "a/b/c/d",
  "a//b",
  "/model",
  "model/",
  "model:",
  ":tag",
  "a:b:c",
  "localhost:5000/model",
  "model:tag/more",
  "-flag",
  "_x",
  "with space",
  "ümlaut",
  "name?",
  "name*",
  "http://127.0.0.1:8000/any.gguf",
  "https://example.com/model.gguf",
];

describe("the model name grammar", () => {
  it.each(valid)("accepts %j", (name) => {
    expect(modelNameProblem(name)).toBeUndefined();
    expect(isValidModelName(name)).toBe(true);
  });

  it.each(invalid.map((name) => [name.length > 60 ? `${name.slice(0, 20)}… (${name.length})` : name, name]))("refuses %j", (_, name) => {
    expect(isValidModelName(name)).toBe(false);
    expect(modelNameProblem(name)).toMatch(/./);
  });

  it("refuses with invalid_request naming the field, never echoing the name", () => {
    const error = (() => {
      try {
        assertModelName("../escaped\u0000", "destination");
      } catch (caught) {
        return caught;
      }
    })();
    expect(isServerError(error) && error.code).toBe("invalid_request");
    expect(isServerError(error) && error.param).toBe("destination");
    expect((error as Error).message).toMatch(/^Invalid value for 'destination': a model name is \[host\/\]\[namespace\/\]name\[:tag\]/);
    expect((error as Error).message).not.toContain("escaped");
    expect(() => assertModelName("qwen2.5:0.5b", "destination")).not.toThrow();
  });

  it("bounds the whole name", () => {
    expect(modelNameProblem("a".repeat(MAX_NAME_LENGTH + 1))).toMatch(/at most 255/);
  });
});

describe("a file's default id", () => {
  it("is the file name without .gguf when that is a valid name", () => {
    expect(defaultModelId("/m/Llama-3.2-1B-Instruct-Q4_K_M.gguf")).toBe("Llama-3.2-1B-Instruct-Q4_K_M");
    expect(defaultModelId("/m/qwen2.5:0.5b.gguf")).toBe("qwen2.5:0.5b");
  });

  it.each([
    ["my model (1).gguf", "my-model-1"],
    ["con.gguf", "model-con"],
    ["NUL.gguf", "model-NUL"],
    ["nul.tar.gguf", "model-nul.tar"],
    ["..x.gguf", "x"],
    ["a..b.gguf", "a.b"],
    ["-x-.gguf", "x"],
    ["(((.gguf", "model"],
    ["a:b:c.gguf", "a-b-c"],
    [`${"é".repeat(200)}x.gguf`, "x"],
    [`${"a".repeat(300)}.gguf`, "a".repeat(122)],
  ])("lists %j under a valid name (%s)", (file, id) => {
    expect(defaultModelId(`/models/${file}`)).toBe(id);
    expect(isValidModelName(defaultModelId(`/models/${file}`))).toBe(true);
  });
});

describe("a plain file name", () => {
  it.each(["model.gguf", "Qwen2.5 (copy).gguf", "console.gguf"])("accepts %j", (name) => expect(isPlainFileName(name)).toBe(true));
  it.each([
    "",
    ".",
    "..",
    ".hidden.gguf",
    "../x.gguf",
    "a/b.gguf",
    "a\\b.gguf",
    "/abs.gguf",
    "nul\u0000.gguf",
    "con.gguf",
    "NUL",
    "Lpt1.x.gguf",
    "a".repeat(256),
  ])("refuses %j", (name) => expect(isPlainFileName(name)).toBe(false));
});
