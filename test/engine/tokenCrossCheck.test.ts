import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { chatBody, fixtureDir, knownDifferences, readShapes, type Fixture } from "../support/chatTemplateFixtures.js";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { buildLlamaCpp } from "../support/llamaCppBuild.js";
import { TOKEN_FAMILIES } from "../support/familyCases.js";
import { llamaCppSource } from "../support/llamaCppSource.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";

/**
 * Issue 31: the token ids of a chat prompt must be llama.cpp's tokenization of the same text, as
 * llama-tokenize (built from the llama.cpp source node-llama-cpp ships) gives it. Each family's real
 * vocabulary (llama.cpp's models/ggml-vocab-*.gguf, or a tokenizer.json converted as llama.cpp's
 * converter does, copied into a tiny model by makeTestModel's vocabularyFrom), or a stand-in of its
 * kind named as one in TOKEN_FAMILIES, with its real chat template, served; for each conversation shape:
 *
 * - the text is transformers' rendering of the shape (test/fixtures/chatTemplates, which
 *   test/http/familyPrompts.test.ts holds the server's rendering to), without a leading BOS where
 *   the vocabulary adds one, as llama-server's chat handling strips it (common/chat.cpp) before
 *   tokenizing with BOS added and special tokens parsed;
 * - llama-tokenize's ids of that text (`--ids`: BOS as the vocabulary says, special tokens parsed;
 *   `--no-escape`: the text as it is, `\n` in JSON arguments included) must equal, id for id, the
 *   server's POST /tokenize with llama-server's semantics (`add_special`, `parse_special`);
 * - the chat path agrees: the prompt POST /apply-template shows is that text (the template's, as
 *   transformers renders it), and a chat completion counts as many prompt tokens. For a
 *   SentencePiece vocabulary the count is where a prompt tokenized piece by piece would show:
 *   llama.cpp writes `▁` after a special token (`<|user|>▁\n…`), so a different split counts others.
 *
 * The tiny model's file must hold the vocabulary as the original does: llama-tokenize on the
 * original ggml-vocab file gives the same ids.
 *
 * Without cmake, g++, make or git the file skips with one line (fails under CI). The first build of
 * llama-tokenize takes minutes (about 6.5 on 2 cores); later runs reuse the cached build.
 */
const repo = path.resolve(import.meta.dirname, "../..");

/** System and user, several turns, a tool call and its result, parallel calls, a past thought. */
const SHAPES = ["system_user", "multi_turn", "tool_result_json", "parallel_calls", "thought_in_history"];

const shapes = readShapes().shapes;
const exec = promisify(execFile);

function readFixture(template: string): Fixture {
  // Synchronous: the cases are known when the tests are collected.
  return JSON.parse(readFileSync(path.join(fixtureDir, `llama.cpp--${template}.json`), "utf8")) as Fixture;
}

const canBuild = needs(...engineBuildTools);

describe.skipIf(!canBuild)("chat prompt token ids against llama-tokenize", () => {
  let server: TestServer;
  let dir: string;
  let tokenizeBinary: string;
  const modelFiles = new Map<string, string>();
  const vocabularyFiles = new Map<string, string>();
  /** The text of the BOS the vocabulary adds (llama-tokenize's ids of no text), or undefined when it adds none. */
  const addedBos = new Map<string, string | undefined>();

  beforeAll(async () => {
    tokenizeBinary = path.join(await buildLlamaCpp(["llama-tokenize"]), "llama-tokenize");
    const source = await llamaCppSource();
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-token-cross-check-"));
    const models: Record<string, string> = {};
    for (const [index, family] of TOKEN_FAMILIES.entries()) {
      const vocabularyFrom =
        typeof family.vocabulary === "string"
          ? path.join(source, `models/ggml-vocab-${family.vocabulary}.gguf`)
          : {
              directory: path.join(repo, "node_modules", family.vocabulary.package, "models"),
              pre: family.vocabulary.pre,
              name: family.name,
            };
      const chatTemplate = await readFile(path.join(source, `models/templates/${family.template}.jinja`), "utf8");
      const made = await makeTestModel({ preset: "tiny", out: path.join(dir, `${index}.gguf`), chatTemplate, vocabularyFrom });
      models[`family-${index}`] = made.path;
      modelFiles.set(family.name, made.path);
      if (typeof vocabularyFrom === "string") vocabularyFiles.set(family.name, vocabularyFrom);
    }
    // The references were rendered at a fixed instant (strftime_now); templates print its date.
    const now = readFixture(TOKEN_FAMILIES[0]!.template).now;
    vi.useFakeTimers({ toFake: ["Date"], now: new Date(`${now}Z`) });
    // Command R7B's tool prompts are about 1,700 tokens in Command R's vocabulary, past the test
    // server's 1,024: the tiny model's whole trained context.
    server = await startTestServer({ models, config: { maxLoadedModels: 1, contextSize: 4096 } });
    for (const [index, family] of TOKEN_FAMILIES.entries()) {
      const bos = await llamaTokenize(modelFiles.get(family.name)!, "");
      const detokenized = await postJson(`${server.url}/detokenize`, { model: `family-${index}`, tokens: bos });
      addedBos.set(family.name, bos.length === 0 ? undefined : ((await detokenized.json()) as { content: string }).content);
    }
  }, 30 * 60_000);

  afterAll(async () => {
    vi.useRealTimers();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  let prompts = 0;
  /** llama-tokenize's ids of `text` in the model file (BOS as its vocabulary says, special tokens parsed, no escapes). */
  async function llamaTokenize(model: string, text: string): Promise<number[]> {
    const file = path.join(dir, `prompt-${prompts++}.txt`);
    await writeFile(file, text);
    const { stdout } = await exec(tokenizeBinary, ["-m", model, "-f", file, "--ids", "--no-escape", "--log-disable"], {
      maxBuffer: 1 << 22,
    });
    return JSON.parse(stdout.trim()) as number[];
  }

  describe.each(TOKEN_FAMILIES.map((family, index) => [family.name, family, `family-${index}`] as const))("%s", (name, family, model) => {
    const fixture = readFixture(family.template);
    const cases = fixture.cases.filter(
      (testCase) =>
        SHAPES.includes(testCase.shape) &&
        testCase.arguments === "object" &&
        testCase.rendered !== undefined &&
        !knownDifferences[`${fixture.template}/${testCase.name}`],
    );

    it.each(cases.map((testCase) => [testCase.name, testCase] as const))("%s", async (_case, testCase) => {
      const rendered = testCase.rendered!;
      // llama-server strips the BOS the template printed when the vocabulary adds one itself.
      const bos = addedBos.get(name);
      const text = bos !== undefined && rendered.startsWith(bos) ? rendered.slice(bos.length) : rendered;

      const llama = await llamaTokenize(modelFiles.get(name)!, text);
      const tokenized = await postJson(`${server.url}/tokenize`, { model, content: text, add_special: true, parse_special: true });
      expect(((await tokenized.json()) as { tokens: number[] }).tokens).toEqual(llama);

      // The chat path renders that same text (POST /apply-template shows the template's text, BOS as the template printed it)…
      const body = chatBody(model, shapes[testCase.shape]!, testCase.kwargs);
      const applied = await postJson(`${server.url}/apply-template`, body);
      expect(((await applied.json()) as { prompt: string }).prompt).toBe(rendered);
      // …and counts as many tokens: a prompt tokenized piece by piece would count others where
      // SentencePiece writes `▁` after a special token (`<|user|>▁\n…`).

      const chat = await postJson(`${server.url}/v1/chat/completions`, { ...body, max_tokens: 1 });
      expect(chat.status).toBe(200);
      expect(((await chat.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(llama.length);
    });

    it("holds the vocabulary as the original does", async () => {
      const longest = cases.map((testCase) => testCase.rendered!).reduce((a, b) => (b.length > a.length ? b : a));
      if (typeof family.vocabulary === "string") {
        expect(await llamaTokenize(modelFiles.get(name)!, longest)).toEqual(await llamaTokenize(vocabularyFiles.get(name)!, longest));
      } else {
        // Converted from tokenizer.json: Hugging Face's tokenizer (the package's own) gives the same ids
        // for the text after the BOS the vocabulary adds (llama-tokenize's ids of no text).
        const { fromPreTrained } = (await import(family.vocabulary.package)) as {
          fromPreTrained: () => { encode(text: string, options: { add_special_tokens: boolean }): number[] };
        };
        const bos = addedBos.get(name);
        const text = bos !== undefined && longest.startsWith(bos) ? longest.slice(bos.length) : longest;
        const added = await llamaTokenize(modelFiles.get(name)!, "");
        expect(await llamaTokenize(modelFiles.get(name)!, text)).toEqual([
          ...added,
          ...fromPreTrained().encode(text, { add_special_tokens: false }),
        ]);
      }
    });
  });
});
