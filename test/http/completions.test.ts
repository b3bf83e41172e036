import { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX } from "../../src/testmodels/fimTokens.js";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const prompt = "The old lighthouse keeper opened the door and";

describe("POST /v1/completions (legacy)", () => {
  let server: TestServer;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny"), "fim-tiny": await testModelPath("fim-tiny") } });
    openai = server.client;
  });
  afterAll(() => server?.close());

  async function streamed(body: OpenAI.CompletionCreateParamsStreaming): Promise<OpenAI.Completion[]> {
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of await openai.completions.create(body)) chunks.push(chunk);
    return chunks;
  }

  it("continues the prompt as is, 16 tokens by default, in the text_completion shape", async () => {
    const reply = await openai.completions.create({ model: "tiny", prompt, temperature: 0 });
    expect(reply.id).toMatch(/^cmpl-[A-Za-z0-9]{29}$/);
    expect(reply.object).toBe("text_completion");
    expect(reply.model).toBe("tiny");
    expect(reply.choices).toHaveLength(1);
    expect(reply.choices[0]).toMatchObject({ index: 0, logprobs: null, finish_reason: "length" });
    expect(reply.choices[0]!.text.length).toBeGreaterThan(0);
    expect(reply.usage).toMatchObject({ completion_tokens: 16 });
    // No chat template: the same text as a chat message takes the template's tokens too.
    const chat = await openai.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: prompt }], max_tokens: 1 });
    expect(reply.usage!.prompt_tokens).toBeLessThan(chat.usage!.prompt_tokens);
    expect(reply.usage!.prompt_tokens).toBeLessThanOrEqual(prompt.length);
  });

  it("streams the same text as the plain reply, then the finish and the usage", async () => {
    const body = { model: "tiny", prompt, max_tokens: 12, temperature: 0 };
    const plain = await openai.completions.create(body);
    const chunks = await streamed({ ...body, stream: true, stream_options: { include_usage: true } });
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks.every((chunk) => chunk.object === "text_completion")).toBe(true);
    expect(chunks.map((chunk) => chunk.choices[0]?.text ?? "").join("")).toBe(plain.choices[0]!.text);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe("length");
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual(plain.usage);
  });

  it("echoes the prompt before the completion", async () => {
    const body = { model: "tiny", prompt, max_tokens: 8, temperature: 0 };
    const plain = await openai.completions.create(body);
    const echoed = await openai.completions.create({ ...body, echo: true });
    expect(echoed.choices[0]!.text).toBe(prompt + plain.choices[0]!.text);
    const chunks = await streamed({ ...body, echo: true, stream: true });
    expect(chunks.map((chunk) => chunk.choices[0]?.text ?? "").join("")).toBe(prompt + plain.choices[0]!.text);
  });

  it("returns legacy logprobs: tokens, their logprobs, the top alternatives with the sampled one, and text offsets; streamed equals plain", async () => {
    const body = { model: "tiny", prompt, max_tokens: 10, temperature: 0, logprobs: 3 };
    const reply = await openai.completions.create(body);
    const { text } = reply.choices[0]!;
    const logprobs = reply.choices[0]!.logprobs!;
    expect(logprobs.tokens).toHaveLength(reply.usage!.completion_tokens);
    expect(logprobs.tokens!.join("")).toBe(text);
    expect(logprobs.text_offset![0]).toBe(0);
    logprobs.tokens!.forEach((token, i) => {
      const top = logprobs.top_logprobs![i]!;
      expect(Object.keys(top).length).toBeLessThanOrEqual(4);
      // At temperature 0 the sampled token is the most likely one.
      expect(top[token]).toBe(logprobs.token_logprobs![i]);
      expect(Math.max(...Object.values(top))).toBe(logprobs.token_logprobs![i]);
      if (i > 0) expect(logprobs.text_offset![i]).toBe(logprobs.text_offset![i - 1]! + [...logprobs.tokens![i - 1]!].length);
    });
    const chunks = await streamed({ ...body, stream: true });
    const merged = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as unknown[], text_offset: [] as number[] };
    for (const chunk of chunks) {
      const part = chunk.choices[0]?.logprobs;
      if (!part?.tokens) continue;
      merged.tokens.push(...part.tokens);
      merged.token_logprobs.push(...part.token_logprobs!);
      merged.top_logprobs.push(...part.top_logprobs!);
      merged.text_offset.push(...part.text_offset!);
    }
    expect(merged).toEqual(logprobs);
  });

  it("scores the prompt's own tokens with echo and logprobs (the first null), then the completion as without echo", async () => {
    const body = { model: "tiny", prompt, max_tokens: 3, temperature: 0, logprobs: 2 };
    const plain = await openai.completions.create(body);
    const echoed = await openai.completions.create({ ...body, echo: true });
    const promptTokens = echoed.usage!.prompt_tokens;
    const logprobs = echoed.choices[0]!.logprobs!;
    expect(echoed.choices[0]!.text).toBe(prompt + plain.choices[0]!.text);
    expect(logprobs.tokens).toHaveLength(promptTokens + 3);
    expect(logprobs.tokens!.join("")).toBe(echoed.choices[0]!.text);
    expect(logprobs.token_logprobs![0]).toBeNull();
    expect(logprobs.top_logprobs![0]).toBeNull();
    for (let i = 1; i < promptTokens; i++) {
      const top = logprobs.top_logprobs![i]!;
      expect(top[logprobs.tokens![i]!]).toBe(logprobs.token_logprobs![i]);
      expect(Object.keys(top).length).toBeLessThanOrEqual(3);
      expect(Math.max(...Object.values(top))).toBeGreaterThanOrEqual(logprobs.token_logprobs![i]!);
    }
    // Reading the prompt with every token's logits leaves the same state: the completion is the same, to the logprob.
    expect(logprobs.token_logprobs!.slice(promptTokens)).toEqual(plain.choices[0]!.logprobs!.token_logprobs);
    expect(logprobs.text_offset![promptTokens]).toBe([...prompt].length);
    const chunks = await streamed({ ...body, echo: true, stream: true });
    expect(chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.token_logprobs ?? [])).toEqual(logprobs.token_logprobs);
  });

  it("takes token ids, arrays of them and several strings, numbering the choices of each prompt in turn", async () => {
    const { tokens } = testVocabulary();
    const ids = [..."Hi there"].map((character) => tokens.indexOf(character === " " ? "Ġ" : character));
    expect(ids.every((id) => id >= 0)).toBe(true);
    const one = await openai.completions.create({ model: "tiny", prompt: ids, max_tokens: 4, temperature: 0, echo: true });
    expect(one.usage!.prompt_tokens).toBe(ids.length);
    expect(one.choices[0]!.text.startsWith("Hi there")).toBe(true);

    const two = await openai.completions.create({ model: "tiny", prompt: [ids, ids.slice(0, 2)], max_tokens: 4, temperature: 0 });
    expect(two.choices.map((choice) => choice.index)).toEqual([0, 1]);
    expect(two.usage).toMatchObject({ prompt_tokens: ids.length + 2, completion_tokens: 8 });

    const strings = await openai.completions.create({
      model: "tiny",
      prompt: ["Once upon", "The river"],
      n: 2,
      max_tokens: 5,
      temperature: 0,
    });
    expect(strings.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3]);
    expect(strings.choices[0]!.text).toBe(strings.choices[1]!.text);
    expect(strings.choices[2]!.text).toBe(strings.choices[3]!.text);
    const once = await openai.completions.create({ model: "tiny", prompt: "The river", max_tokens: 5, temperature: 0 });
    expect(strings.choices[2]!.text).toBe(once.choices[0]!.text);
    expect(strings.usage!.completion_tokens).toBe(20);
    const upon = await openai.completions.create({ model: "tiny", prompt: "Once upon", max_tokens: 1 });
    // Each prompt counted once, however many choices it has.
    expect(strings.usage!.prompt_tokens).toBe(once.usage!.prompt_tokens + upon.usage!.prompt_tokens);

    const chunks = await streamed({ model: "tiny", prompt: ["Once upon", "The river"], n: 2, max_tokens: 3, temperature: 0, stream: true });
    const finished = chunks.filter((chunk) => chunk.choices[0]?.finish_reason).map((chunk) => chunk.choices[0]!.index);
    expect(finished.sort()).toEqual([0, 1, 2, 3]);
  });

  it("answers every malformed request with a 400 naming the parameter", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ model: "tiny" }, "prompt"],
      [{ model: "tiny", prompt: [] }, "prompt"],
      [{ model: "tiny", prompt: "" }, "prompt"],
      [{ model: "tiny", prompt: [1, -2] }, "prompt[1]"],
      [{ model: "tiny", prompt: [100000] }, "prompt"],
      [{ model: "tiny", prompt: Array.from({ length: 33 }, () => "x") }, "prompt"],
      [{ model: "tiny", prompt, logprobs: 6 }, "logprobs"],
      [{ model: "tiny", prompt, n: 9 }, "n"],
      [{ model: "tiny", prompt, n: 5 }, "n"],
      [{ model: "tiny", prompt, best_of: 3 }, "best_of"],
      [{ model: "tiny", prompt, suffix: "end", echo: true }, "echo"],
      [{ model: "tiny", prompt, suffix: "end" }, "suffix"],
      [{ model: "fim-tiny", prompt: [1, 2], suffix: "end" }, "suffix"],
      [{ model: "tiny", prompt, max_tokens: 0 }, "max_tokens"],
      [{ model: "tiny", prompt, temperature: 3 }, "temperature"],
      [{ model: "tiny", prompt, stop: ["a", "b", "c", "d", "e"] }, "stop"],
      [{ model: "tiny", prompt, stream_options: { include_usage: true } }, "stream_options"],
      [{ model: "tiny", prompt, logit_bias: { "99999": 5 } }, "logit_bias"],
    ];
    for (const [body, param] of cases) {
      const response = await postJson(`${server.url}/v1/completions`, body);
      const error = (await response.json()) as { error: { param: string; type: string; message: string } };
      expect({ body, status: response.status, param: error.error.param, type: error.error.type }).toEqual({
        body,
        status: 400,
        param,
        type: "invalid_request_error",
      });
      expect(error.error.message.length).toBeGreaterThan(10);
    }
    await expect(openai.completions.create({ model: "tiny", prompt, suffix: "end" })).rejects.toMatchObject({ status: 400 });
    const unknown = await postJson(`${server.url}/v1/completions`, { model: "nope", prompt });
    expect(unknown.status).toBe(404);
  });

  describe("fill in the middle (fim-tiny, a vocabulary with FIM tokens)", () => {
    const prefix = "def add(a, b):\n    ";
    const suffix = "\n    return total\n";
    const spelled = `${FIM_PREFIX}${prefix}${FIM_SUFFIX}${suffix}${FIM_MIDDLE}`;

    it("sends the prompt as <fim_prefix> prefix <fim_suffix> suffix <fim_middle>, counted exactly", async () => {
      const body = { model: "fim-tiny", max_tokens: 8, temperature: 0, logprobs: 2 };
      const infill = await openai.completions.create({ ...body, prompt: prefix, suffix });
      // The prefix and the suffix alone, as plain prompts, and the three FIM tokens.
      const prefixOnly = await openai.completions.create({ ...body, prompt: prefix, max_tokens: 1 });
      const suffixOnly = await openai.completions.create({ ...body, prompt: suffix, max_tokens: 1 });
      expect(infill.usage!.prompt_tokens).toBe(prefixOnly.usage!.prompt_tokens + suffixOnly.usage!.prompt_tokens + 3);
      // The same layout written out with the special tokens (a raw prompt parses them) reads the same.
      const raw = await openai.completions.create({ ...body, prompt: spelled });
      expect(raw.usage!.prompt_tokens).toBe(infill.usage!.prompt_tokens);
      expect(infill.choices[0]!.text).toBe(raw.choices[0]!.text);
      expect(infill.choices[0]!.logprobs).toEqual(raw.choices[0]!.logprobs);
      // And it is not the prefix alone continued: the suffix changes what comes next.
      const continued = await openai.completions.create({ ...body, prompt: prefix });
      expect(continued.choices[0]!.logprobs!.token_logprobs).not.toEqual(infill.choices[0]!.logprobs!.token_logprobs);
    });

    it("serves /api/generate suffix the same way, and lists the model as insert-capable", async () => {
      const ollama = new Ollama({ host: server.url });
      const options = { temperature: 0, num_predict: 8 };
      const infill = await ollama.generate({ model: "fim-tiny", prompt: prefix, suffix, options });
      const raw = await ollama.generate({ model: "fim-tiny", prompt: spelled, raw: true, options });
      expect(infill.prompt_eval_count).toBe(raw.prompt_eval_count);
      expect(infill.response).toBe(raw.response);
      const completion = await openai.completions.create({ model: "fim-tiny", prompt: prefix, suffix, max_tokens: 1 });
      expect(infill.prompt_eval_count).toBe(completion.usage!.prompt_tokens);
      const show = await ollama.show({ model: "fim-tiny" });
      expect(show.capabilities).toContain("insert");
      await expect(ollama.generate({ model: "tiny", prompt: prefix, suffix, options })).rejects.toMatchObject({ status_code: 400 });
    });
  });
});
