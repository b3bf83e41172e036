import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { encodePng, jpegShell, pngBomb, webpShell, type Rgb } from "../support/images.js";
import { buildLlamaCpp } from "../support/llamaCppBuild.js";
import { startLlamaServerProcess } from "../support/llamaServerProcess.js";
import { ensureNativeEngine } from "../support/nativeEngine.js";
import { openHosted } from "../support/hostedServer.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 33: images through a vision model, on the native engine (`modelhost engine build` binds
 * llama.cpp's tools/mtmd), for the projector kinds the tiny test projectors have (LLaVA's mlp,
 * Gemma 3's, and Qwen2-VL's, whose images take fewer M-RoPE positions than tokens), through every wire format and their official clients; checked against llama-server
 * built from the same llama.cpp source, on the same files: the same prompt_tokens for the same image
 * and text, and at temperature 0 the same reply. Without cmake, g++, make or git the file skips
 * (fails under CI): the native engine and llama-server are built from source.
 */
const KINDS = ["mlp", "gemma3", "qwen2vl"] as const;
type Kind = (typeof KINDS)[number];
/** The text model each projector reads into: Qwen2-VL's places images by M-RoPE positions, which its text model must have. */
const TEXT_MODEL = { mlp: "tiny", gemma3: "tiny", qwen2vl: "qwen2vl-tiny" } as const satisfies Record<Kind, string>;

/** A 48 × 40 picture: a colour with a dark diagonal stripe pattern, as PNG bytes. */
const picture = (color: Rgb) => encodePng(48, 40, (x, y) => ((x + y) % 7 ? color : [0, 0, 0]));
const dataUrl = (bytes: Uint8Array, type = "image/png") => `data:${type};base64,${Buffer.from(bytes).toString("base64")}`;
const RED: Rgb = [230, 30, 30];
const BLUE: Rgb = [30, 30, 230];

const canBuild = needs(...engineBuildTools);

describe.skipIf(!canBuild)("images through a vision model (native engine, llama.cpp's mtmd)", () => {
  let dir: string;
  let server: TestServer;
  let llamaServerBin: string;
  const projectors = {} as Record<Kind, string>;

  beforeAll(async () => {
    await ensureNativeEngine();
    llamaServerBin = path.join(await buildLlamaCpp(["llama-server"]), "llama-server");
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-vision-"));
    for (const kind of KINDS) {
      projectors[kind] = path.join(dir, `mmproj-tiny-${kind}-f16.gguf`);
      await projectorWriter(TINY_PROJECTORS[kind], 7).write(projectors[kind]);
    }
    const tiny = await testModelPath("tiny");
    // Each projector pairs with its model by name (mmproj-<model>-f16.gguf); `tiny` has none.
    server = await startTestServer({
      models: {
        tiny,
        "tiny-mlp": tiny,
        "tiny-gemma3": tiny,
        "tiny-qwen2vl": await testModelPath("qwen2vl-tiny"),
        "mmproj-tiny-mlp-f16": projectors.mlp,
        "mmproj-tiny-gemma3-f16": projectors.gemma3,
        "mmproj-tiny-qwen2vl-f16": projectors.qwen2vl,
      },
      config: { engine: "native", threads: 2, parallel: 2 },
    });
  }, 40 * 60_000);
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const chat = (model: string, content: OpenAI.ChatCompletionContentPart[]) =>
    server.client.chat.completions.create({ model, max_tokens: 16, temperature: 0, messages: [{ role: "user", content }] });
  const ask = (model: string, image: Uint8Array, text = "What is in this picture?") =>
    chat(model, [
      { type: "text", text },
      { type: "image_url", image_url: { url: dataUrl(image) } },
    ]);

  it("pairs each projector with its model by name, and lists those models as reading images", async () => {
    const models = await server.client.models.list();
    const capabilities = (id: string) =>
      (models.data.find((model) => model.id === id) as unknown as { capabilities: string[] }).capabilities;
    expect(capabilities("tiny-mlp")).toContain("vision");
    expect(capabilities("tiny-gemma3")).toContain("vision");
    expect(capabilities("tiny")).not.toContain("vision");
    // Projectors are not models.
    expect(models.data.map((model) => model.id)).not.toContain("mmproj-tiny-mlp-f16");
    const ollama = new Ollama({ host: server.url });
    expect((await ollama.show({ model: "tiny-gemma3" })).capabilities).toContain("vision");
    expect((await ollama.show({ model: "tiny" })).capabilities).not.toContain("vision");
  });

  it.each(KINDS)(
    "gives llama-server's prompt_tokens and reply for the same image and text, on the same files (%s projector)",
    async (kind) => {
      const llamaServer = await startLlamaServerProcess(llamaServerBin, [
        ...["-m", await testModelPath(TEXT_MODEL[kind]), "--mmproj", projectors[kind]],
        ...["-t", "2", "-c", "1024", "-np", "1", "--no-warmup"],
      ]);
      try {
        const base = llamaServer.url;
        for (const color of [RED, BLUE]) {
          const body = imageQuestion(`tiny-${kind}`, dataUrl(picture(color)), "Answer briefly.");
          const theirs = (await (await postJson(`${base}/v1/chat/completions`, body)).json()) as Completion;
          const ours = (await (await postJson(`${server.url}/v1/chat/completions`, body)).json()) as Completion;
          expect(theirs.usage.prompt_tokens, llamaServer.log().slice(-2000)).toBeGreaterThan(16);
          expect(ours.usage.prompt_tokens).toBe(theirs.usage.prompt_tokens);
          expect(ours.usage.completion_tokens).toBe(theirs.usage.completion_tokens);
          // The same tokens: llama-server ends a reply cut inside a character (random weights
          // write byte tokens) with U+FFFD, where modelhost gives out whole characters only.
          expect(ours.choices[0]!.message.content).toBe(theirs.choices[0]!.message.content.replace(/\uFFFD+$/, ""));
          // The conversation's next turn, its image read from each server's cache: the same count
          // of cached tokens (an M-RoPE image's 30 tokens count, not its 6 positions), and the same
          // reply, so the text after a cached image goes on at the positions llama-server gives it.
          const next = {
            ...body,
            messages: [
              ...body.messages,
              { role: "assistant", content: ours.choices[0]!.message.content },
              { role: "user", content: "And its colour?" },
            ],
          };
          const theirsNext = (await (await postJson(`${base}/v1/chat/completions`, next)).json()) as Completion;
          const oursNext = (await (await postJson(`${server.url}/v1/chat/completions`, next)).json()) as Completion;
          expect(oursNext.usage.prompt_tokens).toBe(theirsNext.usage.prompt_tokens);
          expect(theirsNext.usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(theirs.usage.prompt_tokens - 1);
          expect(oursNext.usage.prompt_tokens_details!.cached_tokens).toBe(theirsNext.usage.prompt_tokens_details!.cached_tokens);
          expect(oursNext.choices[0]!.message.content).toBe(theirsNext.choices[0]!.message.content.replace(/\uFFFD+$/, ""));
        }
      } finally {
        await llamaServer.stop();
      }
    },
    10 * 60_000,
  );

  it.each(KINDS)("answers two images differently and one image alike, at temperature 0 (%s projector)", async (kind) => {
    const model = `tiny-${kind}`;
    const [red, blue, redAgain] = [await ask(model, picture(RED)), await ask(model, picture(BLUE)), await ask(model, picture(RED))];
    expect(red.choices[0]!.message.content).not.toBe(blue.choices[0]!.message.content);
    expect(redAgain.choices[0]!.message.content).toBe(red.choices[0]!.message.content);
    // The image's 16 tokens are in the count: the same text without it is shorter by those and the
    // markup Gemma 3's projector wraps them in.
    const text = await server.client.chat.completions.create({
      model,
      max_tokens: 1,
      messages: [{ role: "user", content: [{ type: "text", text: "What is in this picture?" }] }],
    });
    expect(red.usage!.prompt_tokens - text.usage!.prompt_tokens).toBeGreaterThanOrEqual(16);
  });

  it("reads the image from every wire format and official client: the same prompt gives the same reply", async () => {
    const model = "tiny-gemma3";
    const question = "What is in this picture?";
    const png = picture(BLUE);
    const base64 = Buffer.from(png).toString("base64");
    // The image first, then the text: Ollama places a message's images before its text.
    const openai = await chat(model, [
      { type: "image_url", image_url: { url: dataUrl(png) } },
      { type: "text", text: question },
    ]);
    const expected = openai.choices[0]!.message.content;
    // Streamed, and two choices of one prompt (its image read once, then shared): the same text.
    const stream = await server.client.chat.completions.create({
      model,
      max_tokens: 16,
      temperature: 0,
      stream: true,
      n: 2,
      messages: [
        {
          role: "user",
          content: [
            { type: "image_url", image_url: { url: dataUrl(png) } },
            { type: "text", text: question },
          ],
        },
      ],
    });
    const streamed = ["", ""];
    for await (const chunk of stream) for (const choice of chunk.choices) streamed[choice.index] += choice.delta.content ?? "";
    expect(streamed).toEqual([expected, expected]);
    // Through a variable: the SDK's types no longer declare temperature, which the API takes.
    const greedy = { model, max_tokens: 16, temperature: 0 };
    const anthropic = await new Anthropic({ baseURL: server.url, apiKey: "local", maxRetries: 0 }).messages.create({
      ...greedy,
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/png", data: base64 } },
            { type: "text", text: question },
          ],
        },
      ],
    });
    expect(anthropic.content).toEqual([expect.objectContaining({ type: "text", text: expected })]);
    // Anthropic's input_tokens leave out what was read from the cache.
    expect(anthropic.usage.input_tokens + (anthropic.usage.cache_read_input_tokens ?? 0)).toBe(openai.usage!.prompt_tokens);
    const responses = await server.client.responses.create({
      model,
      max_output_tokens: 16,
      temperature: 0,
      store: false,
      input: [
        {
          role: "user",
          content: [
            { type: "input_image", image_url: dataUrl(png), detail: "auto" },
            { type: "input_text", text: question },
          ],
        },
      ],
    });
    expect(responses.output_text).toBe(expected);
    const ollama = new Ollama({ host: server.url });
    const nativeChat = await ollama.chat({
      model,
      messages: [{ role: "user", content: question, images: [base64] }],
      options: { temperature: 0, num_predict: 16 },
    });
    expect(nativeChat.message.content).toBe(expected);
    expect(nativeChat.prompt_eval_count).toBe(openai.usage!.prompt_tokens);
    const generated = await ollama.generate({ model, prompt: question, images: [png], options: { temperature: 0, num_predict: 16 } });
    expect(generated.response).toBe(expected);
  });

  it("shows where the image goes in the rendered prompt, and counts its tokens without generating", async () => {
    const body = imageQuestion("tiny-gemma3", dataUrl(picture(RED)), "Answer briefly.");
    const { prompt } = (await (await postJson(`${server.url}/apply-template`, body)).json()) as { prompt: string };
    // The text parts joined by a newline, the image between them with none beside it.
    expect(prompt).toContain("What is in this picture?<__media__>Answer briefly.");
    const chatCompletion = (await (await postJson(`${server.url}/v1/chat/completions`, { ...body, max_tokens: 1 })).json()) as Completion;
    const counted = await postJson(`${server.url}/v1/messages/count_tokens`, {
      model: "tiny-gemma3",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is in this picture?" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: Buffer.from(picture(RED)).toString("base64") } },
            { type: "text", text: "Answer briefly." },
          ],
        },
      ],
    });
    expect(await counted.json()).toEqual({ input_tokens: chatCompletion.usage.prompt_tokens });
  });

  it.each(["mlp", "qwen2vl"] as const)(
    "keeps a conversation's image in the cache: the next turn reads only what is new (%s projector)",
    async (kind) => {
      const model = `tiny-${kind}`;
      const image = { type: "image_url" as const, image_url: { url: dataUrl(picture([20, 160, 40])) } };
      const first = await server.client.chat.completions.create({
        model,
        max_tokens: 8,
        temperature: 0,
        messages: [{ role: "user", content: [{ type: "text", text: "Describe it." }, image] }],
      });
      const second = await server.client.chat.completions.create({
        model,
        max_tokens: 8,
        temperature: 0,
        messages: [
          { role: "user", content: [{ type: "text", text: "Describe it." }, image] },
          { role: "assistant", content: first.choices[0]!.message.content! },
          { role: "user", content: "And its colour?" },
        ],
      });
      // Counted as prompt_tokens are (an M-RoPE image by its tokens), as llama-server's cached_tokens.
      expect(second.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(first.usage!.prompt_tokens - 1);
      expect(second.usage!.prompt_tokens_details!.cached_tokens).toBeLessThan(second.usage!.prompt_tokens);
    },
  );

  describe("hostile or unusable images: a 400 in each protocol's shape, and the server goes on serving", () => {
    const longPng = picture(RED);
    const cases: Array<[string, string, RegExp]> = [
      ["a decompression bomb (a small PNG declaring 50,000 × 50,000 pixels)", dataUrl(pngBomb(50_000, 50_000)), /50000 × 50000 pixels/],
      ["a PNG cut short", dataUrl(longPng.subarray(0, longPng.length - 20)), /cut short/],
      ["a JPEG cut short", dataUrl(jpegShell(64, 64).subarray(0, 120), "image/jpeg"), /cut short/],
      ["a PNG declared as a JPEG", dataUrl(longPng, "image/jpeg"), /declared as image\/jpeg/],
      ["an SVG", dataUrl(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), "image/svg+xml"), /SVG/],
      ["a WebP llama.cpp cannot decode", dataUrl(webpShell(32, 32), "image/webp"), /could not be decoded/],
      ["an http URL, which this server does not fetch", "http://127.0.0.1:9/picture.png", /--image-urls is off/],
      ["not base64", "data:image/png;base64,!!!!", /not valid base64/],
    ];

    it.each(cases)("refuses %s", async (_name, url, reason) => {
      const model = "tiny-mlp";
      const openai = await postJson(`${server.url}/v1/chat/completions`, {
        model,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "?" },
              { type: "image_url", image_url: { url } },
            ],
          },
        ],
      });
      expect(openai.status).toBe(400);
      const { error } = (await openai.json()) as { error: { type: string; param: string; message: string } };
      expect(error).toMatchObject({
        type: "invalid_request_error",
        param: "messages[0].content[1].image_url.url",
        message: expect.stringMatching(reason),
      });

      const base64 = /^data:[^,]*;base64,/.test(url) ? url.slice(url.indexOf(",") + 1) : undefined;
      const source =
        base64 === undefined ? { type: "url", url } : { type: "base64", media_type: /^data:([^;]*)/.exec(url)![1], data: base64 };
      const anthropic = await postJson(`${server.url}/v1/messages`, {
        model,
        max_tokens: 4,
        messages: [{ role: "user", content: [{ type: "image", source }] }],
      });
      expect(anthropic.status).toBe(400);
      expect(await anthropic.json()).toMatchObject({
        type: "error",
        error: { type: "invalid_request_error", message: expect.stringMatching(reason) },
      });

      if (base64 !== undefined && !/declared/.test(reason.source)) {
        const ollama = await postJson(`${server.url}/api/chat`, {
          model,
          stream: false,
          messages: [{ role: "user", content: "?", images: [base64] }],
        });
        expect(ollama.status).toBe(400);
        expect(await ollama.json()).toEqual({ error: expect.stringMatching(reason) });
      }
      // Still serving images.
      expect((await ask(model, picture(BLUE))).choices[0]!.message.content).toBeTruthy();
    });

    it("refuses more images than --max-images, and images for a model without a projector", async () => {
      const many = Array.from({ length: 9 }, () => ({ type: "image_url" as const, image_url: { url: dataUrl(picture(RED)) } }));
      const tooMany = await postJson(`${server.url}/v1/chat/completions`, {
        model: "tiny-mlp",
        messages: [{ role: "user", content: many }],
      });
      expect(tooMany.status).toBe(400);
      expect(await tooMany.json()).toMatchObject({
        error: { param: "messages[0].content[8].image_url.url", message: expect.stringMatching(/at most 8 \(--max-images\)/) },
      });
      const textOnly = await postJson(`${server.url}/v1/chat/completions`, {
        model: "tiny",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl(picture(RED)) } }] }],
      });
      expect(textOnly.status).toBe(400);
      expect(await textOnly.json()).toMatchObject({
        error: { message: expect.stringMatching(/`tiny` does not read images: it has no vision projector/) },
      });
    });
  });

  it("counts an image's tokens in the hosted profile's limits and in its ledger", async () => {
    const hosted = await openHosted({
      tiers: {
        default: "open",
        tiers: { open: { requestsPerMinute: 100, tokensPerDay: 100_000 }, small: { requestsPerMinute: 100, maxInputTokens: 32 } },
      },
    });
    try {
      const hostedServer = await hosted.serve({
        models: { "tiny-mlp": await testModelPath("tiny"), "mmproj-tiny-mlp-f16": projectors.mlp },
        config: { engine: "native", threads: 2 },
      });
      const post = (token: string, body: object) =>
        postJson(`${hostedServer.url}/v1/chat/completions`, body, {
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        });
      const open = await hosted.newAccount("open");
      const reply = (await (await post(open.token, imageQuestion("tiny-mlp", dataUrl(picture(RED))))).json()) as Completion;
      expect(reply.usage.prompt_tokens).toBeGreaterThan(16);
      await expect
        .poll(async () => (await hosted.accounts.usage({ account: open.name })).reduce((sum, row) => sum + row.promptTokens, 0))
        .toBe(reply.usage.prompt_tokens);
      // The question alone fits a tier of 32 input tokens; with the image's 16 it does not.
      const small = await hosted.newAccount("small");
      const question = { model: "tiny-mlp", max_tokens: 4, messages: [{ role: "user", content: "What is in this picture?" }] };
      expect((await post(small.token, question)).status).toBe(200);
      const refused = await post(small.token, imageQuestion("tiny-mlp", dataUrl(picture(RED))));
      expect(refused.status).toBe(413);
      expect(await refused.json()).toMatchObject({
        error: { message: expect.stringMatching(/the prompt has \d+ tokens, and your tier allows 32/) },
      });
    } finally {
      await hosted.close();
    }
  });

  it("fetches an image by URL where the operator allows it (--image-urls), within its size and time limits", async () => {
    const png = picture(RED);
    const images: Server = createServer((request, response) => {
      if (request.url === "/red.png") response.writeHead(200, { "content-type": "image/png" }).end(png);
      else if (request.url === "/huge.png") response.writeHead(200, { "content-type": "image/png" }).end(Buffer.alloc(300_000));
      else if (request.url === "/slow.png") setTimeout(() => response.writeHead(200).end(png), 2_000);
      else response.writeHead(404).end();
    });
    images.listen(0, "127.0.0.1");
    await once(images, "listening");
    const host = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
    const fetching = await startTestServer({
      models: { "tiny-mlp": await testModelPath("tiny"), "mmproj-tiny-mlp-f16": projectors.mlp },
      config: { engine: "native", threads: 2, imageUrls: true, imageUrlTimeout: 500, maxImageBytes: 200_000 },
    });
    try {
      const body = (url: string) => imageQuestion("tiny-mlp", url);
      const byUrl = (await (await postJson(`${fetching.url}/v1/chat/completions`, body(`${host}/red.png`))).json()) as Completion;
      const inline = (await (await postJson(`${fetching.url}/v1/chat/completions`, body(dataUrl(png)))).json()) as Completion;
      expect(byUrl.choices[0]!.message.content).toBe(inline.choices[0]!.message.content);
      expect(byUrl.usage.prompt_tokens).toBe(inline.usage.prompt_tokens);
      for (const [file, reason] of [
        ["missing.png", /HTTP 404/],
        ["huge.png", /larger than the 200000 bytes/],
        ["slow.png", /longer than 500 ms/],
      ] as const) {
        const refused = await postJson(`${fetching.url}/v1/chat/completions`, body(`${host}/${file}`));
        expect(refused.status).toBe(400);
        expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(reason) } });
      }
    } finally {
      await fetching.close();
      images.close();
    }
  });
});

/** A chat completions body asking about the image at `url`, greedy; `after`: text after the image. */
function imageQuestion(model: string, url: string, after?: string) {
  const content = [
    { type: "text", text: "What is in this picture?" },
    { type: "image_url", image_url: { url } },
    ...(after === undefined ? [] : [{ type: "text", text: after }]),
  ];
  return { model, max_tokens: 16, temperature: 0, messages: [{ role: "user", content }] };
}

interface Completion {
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
  choices: Array<{ message: { content: string } }>;
}
