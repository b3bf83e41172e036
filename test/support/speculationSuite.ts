import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/settings.js";
import type { EngineCounters } from "../../src/core/ModelInfo.js";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { scriptText, scriptTokens } from "../../src/testmodels/scriptTokens.js";
import { postJson, startTestServer, type TestServer } from "./startTestServer.js";
import { llamaCppSource } from "./llamaCppSource.js";
import { testModelPath } from "./testModels.js";

/**
 * Issue 35: speculative decoding (--speculation ngram, --speculation draft) writes what the server
 * writes without it, token for token, through every wire format, streamed and not, with 1 and 4
 * streams, with a grammar, with stop strings, at temperature > 0 with a seed, and after an abort
 * mid-draft. A scripted model copies a passage its prompt holds (so drafts are accepted), then
 * writes free text (where they mostly are not); the tiny model writes free text throughout. Run
 * on the engine the server picks (test/http: the prebuilt binary on a fresh machine, whose steps
 * are all sampled from JavaScript) and on the native build (test/engine: native steps and loop).
 */
const PASSAGE = "A quiet river runs past old stone walls, under green hills, toward distant blue water.";
const script = { tokens: scriptTokens(`\n${PASSAGE}`) };
const ASK = `Rewrite this passage: ${PASSAGE}`;

const OTHER = "Zebras graze quietly beside muddy ponds while bright yellow birds sing overhead.";

/**
 * Each kind of drafting against the same server without it. With "draft", the scripted model's
 * draft is a scripted model of the same script and vocabulary (other random weights: it agrees on
 * the passage, not on the free text after it), and the tiny model's a scripted model of another
 * script, which it never agrees with: the useless draft.
 */
export function describeSpeculation(engine: Config["engine"], prepare: () => Promise<unknown> = async () => {}): void {
  describe.each(["ngram", "draft"] as const)(`speculative decoding (%s, engine ${engine})`, (speculation) => {
    let dir: string;
    let on: TestServer;
    let off: TestServer;
    const logLines: string[] = [];

    beforeAll(async () => {
      await prepare();
      dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-speculation-"));
      const scripted = async (name: string, tokens: string[], seed?: number) =>
        (await makeTestModel({ preset: "script-tiny", out: path.join(dir, `${name}.gguf`), script: { tokens }, ...(seed ? { seed } : {}) }))
          .path;
      const models = {
        copy: await scripted("copy", script.tokens),
        "copy-draft": await scripted("copy-draft", script.tokens, 7),
        other: await scripted("other", scriptTokens(`\n${OTHER}`)),
        tiny: await testModelPath("tiny"),
        think: await testModelPath("think-tiny"),
        // Llama 2's SentencePiece vocabulary, where the others have the project's byte-level BPE.
        spm: (
          await makeTestModel({
            preset: "tiny",
            out: path.join(dir, "spm.gguf"),
            vocabularyFrom: path.join(await llamaCppSource(), "models/ggml-vocab-llama-spm.gguf"),
          })
        ).path,
      };
      const manifest = {
        models: [
          { file: "copy.gguf", draft: "copy-draft" },
          { file: "tiny.gguf", draft: "other" },
          { file: "think.gguf", draft: "spm" },
        ],
      };
      on = await startTestServer({
        models,
        manifest,
        config: { engine, speculation, logLevel: "info" },
        logDestination: { write: (line) => void logLines.push(line) },
      });
      off = await startTestServer({ models, manifest, config: { engine } });
    }, 40 * 60_000);
    afterAll(async () => {
      await on?.close();
      await off?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    const health = async (server: TestServer) =>
      ((await (await fetch(`${server.url}/health`)).json()) as { counters: EngineCounters }).counters;
    /** The same request to both servers: the replies, which must be equal. */
    const both = async <T>(request: (server: TestServer) => Promise<T>): Promise<[T, T]> => [await request(on), await request(off)];
    const chat = (server: TestServer, params: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) =>
      server.client.chat.completions.create({
        model: "copy",
        messages: [{ role: "user", content: ASK }],
        max_tokens: 64,
        temperature: 0,
        ...params,
      });

    it("copies the passage with drafts the model accepts, and writes what it writes without them", async () => {
      const before = await health(on);
      const [ours, theirs] = await both((server) => chat(server));
      const text = ours.choices[0]!.message.content!;
      expect(text.slice(0, PASSAGE.length)).toBe(scriptText(script.tokens.slice(1)));
      expect(text).toBe(theirs.choices[0]!.message.content);
      expect(ours.usage).toEqual(theirs.usage);
      const after = await health(on);
      // The passage is ~30 tokens: most of them came from accepted drafts.
      expect(after.draftTokensAccepted - before.draftTokensAccepted).toBeGreaterThan(15);
      expect(after.draftTokens).toBeGreaterThanOrEqual(after.draftTokensAccepted);
      expect((await health(off)).draftTokens).toBe(0);
      const metrics = await (await fetch(`${on.url}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`^modelhost_draft_tokens_accepted_total ${after.draftTokensAccepted}$`, "m"));
      if (speculation === "draft") {
        const loaded = logLines.map((each) => JSON.parse(each) as Record<string, unknown>).filter((each) => each.msg === "model loaded");
        expect(loaded.find((each) => each.model === "copy")?.draft).toBe("copy-draft");
      }
      // The generation's log line says what was drafted and accepted.
      const line = logLines
        .map((each) => JSON.parse(each) as Record<string, unknown>)
        .findLast((each) => each.msg === "generation finished");
      expect(line?.draftTokensAccepted).toBeGreaterThan(15);
    });

    it("drafts from its own source: a draft model without the passage in the prompt, prompt lookup only with it", async () => {
      // The passage has no pair of tokens twice, so prompt lookup finds nothing in the reply alone;
      // the draft model writes the same script whatever the prompt.
      const before = await health(on);
      const [ours, theirs] = await both((server) => chat(server, { messages: [{ role: "user", content: "Tell me about the river." }] }));
      expect(ours.choices[0]!.message.content).toBe(theirs.choices[0]!.message.content);
      const accepted = (await health(on)).draftTokensAccepted - before.draftTokensAccepted;
      if (speculation === "draft") expect(accepted).toBeGreaterThan(15);
      else expect(accepted).toBeLessThan(5);
    });

    // Declared for the draft model only, rather than skipped for n-gram: a run lists no skipped test.
    if (speculation === "draft")
      it("refuses a draft model of another vocabulary, saying why, and drafts by n-gram", async () => {
        const [ours, theirs] = await both((server) => chat(server, { model: "think" }));
        expect(ours.choices[0]!.message).toEqual(theirs.choices[0]!.message);
        const warning = logLines
          .map((each) => JSON.parse(each) as Record<string, unknown>)
          .find((each) => each.model === "think" && each.draft === "spm");
        expect(warning?.msg).toBe(
          "The model `think` drafts by n-gram: The model `spm` cannot draft for `think`: its vocabulary is spm, the target's bpe. A draft model must have its target's vocabulary (a smaller model of the same family).",
        );
      });

    it("writes the same streamed, through every wire format and the official clients", async () => {
      const streamed = async (server: TestServer) => {
        let text = "";
        for await (const chunk of await server.client.chat.completions.create({
          model: "copy",
          messages: [{ role: "user", content: ASK }],
          max_tokens: 64,
          temperature: 0,
          stream: true,
        }))
          text += chunk.choices[0]?.delta.content ?? "";
        return text;
      };
      const completions = async (server: TestServer, stream: boolean) => {
        const body = { model: "copy", prompt: `${ASK}\n`, max_tokens: 64, temperature: 0 };
        if (!stream) return (await server.client.completions.create(body)).choices[0]!.text;
        let text = "";
        for await (const chunk of await server.client.completions.create({ ...body, stream: true })) text += chunk.choices[0]?.text ?? "";
        return text;
      };
      const responses = async (server: TestServer) =>
        (await server.client.responses.create({ model: "copy", input: ASK, max_output_tokens: 64, temperature: 0 })).output_text;
      const messages = async (server: TestServer) =>
        (await (
          await postJson(`${server.url}/v1/messages`, {
            model: "copy",
            max_tokens: 64,
            temperature: 0,
            messages: [{ role: "user", content: ASK }],
          })
        ).json()) as unknown;
      const ollama = async (server: TestServer) => {
        const client = new Ollama({ host: server.url });
        const reply = await client.chat({
          model: "copy",
          messages: [{ role: "user", content: ASK }],
          options: { temperature: 0, num_predict: 64 },
        });
        const generated = await client.generate({ model: "copy", prompt: ASK, options: { temperature: 0, num_predict: 64 } });
        return [reply.message.content, generated.response];
      };
      for (const request of [
        streamed as (server: TestServer) => Promise<unknown>,
        (server: TestServer) => completions(server, false),
        (server: TestServer) => completions(server, true),
        responses,
        ollama,
      ]) {
        const [ours, theirs] = await both(request);
        expect(ours).toEqual(theirs);
      }
      const [ours, theirs] = (await both(messages)) as [{ content: unknown; usage: unknown }, { content: unknown; usage: unknown }];
      expect(ours.content).toEqual(theirs.content);
      expect(ours.usage).toEqual(theirs.usage);
    });

    it("writes the same with 4 streams at once, copying and not, as each alone", async () => {
      const requests = [
        { model: "copy", content: ASK },
        { model: "tiny", content: "Tell me about rivers." },
        { model: "copy", content: `Please rewrite: ${PASSAGE} ${PASSAGE}` },
        { model: "tiny", content: `Rewrite this passage: ${PASSAGE}` },
      ];
      const run = (server: TestServer) =>
        Promise.all(
          requests.map(async ({ model, content }) => {
            let text = "";
            const stream = await server.client.chat.completions.create({
              model,
              messages: [{ role: "user", content }],
              max_tokens: 48,
              temperature: 0,
              stream: true,
            });
            for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
            return text;
          }),
        );
      const [ours, theirs] = await both(run);
      expect(ours).toEqual(theirs);
      if (speculation === "draft") {
        // The useless draft: its script is never what the tiny model writes.
        const loaded = logLines.map((each) => JSON.parse(each) as Record<string, unknown>).filter((each) => each.msg === "model loaded");
        expect(loaded.find((each) => each.model === "tiny")?.draft).toBe("other");
      }
      const alone = [];
      for (const { model, content } of requests)
        alone.push((await chat(on, { model, messages: [{ role: "user", content }], max_tokens: 48 })).choices[0]!.message.content);
      expect(ours).toEqual(alone);
    });

    it("writes the same with a grammar, with a stop string, and at temperature 0.8 with a seed", async () => {
      const schema = {
        type: "json_schema" as const,
        json_schema: {
          name: "answer",
          strict: true,
          schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        },
      };
      for (const params of [
        { response_format: schema, model: "tiny" },
        { response_format: schema },
        { stop: ["stone walls"] },
        { temperature: 0.8, seed: 42 },
        { temperature: 0.8, seed: 42, model: "tiny", messages: [{ role: "user" as const, content: ASK }] },
      ]) {
        const [ours, theirs] = await both((server) => chat(server, params));
        expect(ours.choices[0]!.message.content).toBe(theirs.choices[0]!.message.content);
        expect(ours.choices[0]!.finish_reason).toBe(theirs.choices[0]!.finish_reason);
      }
      const stopped = await chat(on, { stop: ["stone walls"] });
      expect(stopped.choices[0]!.message.content).toBe("A quiet river runs past old ");
      const json = await chat(on, { response_format: schema, model: "tiny", max_tokens: 200 });
      expect(() => JSON.parse(json.choices[0]!.message.content!) as unknown).not.toThrow();
    });

    it("stops at once when the client leaves mid-draft, and writes the same after", async () => {
      // A long reply read for a moment, then left: the server stops decoding it at the next step.
      const controller = new AbortController();
      const response = await postJson(
        `${on.url}/v1/chat/completions`,
        { model: "copy", messages: [{ role: "user", content: ASK }], max_tokens: 3000, temperature: 0, stream: true },
        { signal: controller.signal },
      );
      const reader = response.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.read().catch(() => undefined);
      const [ours, theirs] = await both((server) => chat(server));
      expect(ours.choices[0]!.message.content).toBe(theirs.choices[0]!.message.content);
    });
  });
}
