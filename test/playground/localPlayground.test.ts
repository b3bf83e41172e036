// Issue 13, the page in the local profile: real headless Chromium against the real server with
// generated test models. No sign-in; chat streams, stops (and the server frees the slot), edits,
// resets and copies as code; side by side streams both; model output never runs as HTML.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import type { Browser, Page, Request } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { buildPage, type BuiltPage, HOSTILE, openPlayground, REPO, screenshot } from "./support.js";

const run = promisify(execFile);
const SETTLE = { timeout: 10_000, interval: 50 };

describe.skipIf(!needs("chromium"))("the playground page, local profile, in headless Chromium", () => {
  let built: BuiltPage;
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    built = await buildPage();
    // tiny with a 32,768-token context, under two names: two models as far as the server and the
    // page are concerned. The stop tests ask for 100,000 tokens, so the context bounds the answer:
    // about 32,700 tokens, seconds of streaming even on a fast machine, where tiny's 4,096 could
    // end before Playwright has clicked Stop.
    const tiny = await testModelPath("long-tiny");
    server = await startTestServer({ models: { tiny, "tiny-b": tiny }, playgroundDir: built.dir, config: { contextSize: 32_768 } });
    ({ browser, page, problems } = await openPlayground(server.url));
  });
  // Every test, the last ones too: nothing the page logged as an error or threw, no request off the origin.
  afterEach(() => {
    expect(problems.splice(0)).toEqual([]);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await built?.remove();
  });

  const slots = async () => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: { id: string; active: number; queued: number }[] };
    return (
      health.loaded.filter((model) => model.id === "tiny").map(({ active, queued }) => ({ active, queued }))[0] ?? { active: 0, queued: 0 }
    );
  };
  const lastAnswer = () => page.locator("#chat-messages .message.assistant .content").last();
  const send = async (text: string) => {
    await page.fill("#chat-input", text);
    await page.click("#chat-send");
  };

  it("needs no sign-in, and shows only the pages the local profile has", async () => {
    await page.locator("#chat-input").waitFor();
    expect(await page.locator("#sign-in-form").count()).toBe(0);
    expect(await page.locator("nav a").allTextContents()).toEqual(["Chat", "Side by side"]);
    expect(await page.locator("#sign-out").count()).toBe(0);
    expect(await page.locator("#chat-model option").allTextContents()).toEqual(["tiny", "tiny-b"]);
    expect(await page.title()).toBe("Chat · modelhost playground");
  });

  it("streams a chat answer", async () => {
    await page.selectOption("#chat-model", "tiny");
    await page.fill("#chat-max-tokens", "200");
    // Greedy decoding: the random test model writes the same tokens every run, so the figures
    // under the answer (which need more than one token) are always there.
    await page.fill("#chat-temperature", "0");
    await page.fill("#chat-system", "You are terse.");
    const request = page.waitForRequest((candidate) => candidate.url().endsWith("/playground/api/chat/completions"));
    const response = page.waitForResponse((candidate) => candidate.url().endsWith("/playground/api/chat/completions"));
    await send("Tell me about the river.");
    const body = (await request).postDataJSON() as Record<string, unknown>;
    expect(body).toMatchObject({
      model: "tiny",
      stream: true,
      max_tokens: 200,
      temperature: 0,
      top_p: 1,
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Tell me about the river." },
      ],
    });
    expect((await response).headers()["content-type"]).toMatch(/^text\/event-stream/);
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();

    expect((await lastAnswer().textContent())?.length).toBeGreaterThan(0);
    expect(await page.locator("#chat-messages .message.assistant .meta").last().textContent()).toMatch(
      /^tiny · TTFT \d[\d,]* ms · [\d.]+ tokens\/s · \d+ tokens · finish: (stop|length)$/,
    );
    expect(await page.locator("#chat-messages .message.user .content").allTextContents()).toEqual(["Tell me about the river."]);
    await screenshot(page, "local-chat");
  });

  it("edits and resends the last message, then resets the conversation", async () => {
    await page.click("#chat-edit");
    expect(await page.inputValue("#chat-input")).toBe("Tell me about the river.");
    expect(await page.locator("#chat-messages .message").count()).toBe(0);
    await send("Tell me about the bridge.");
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();
    expect(await page.locator("#chat-messages .message.user .content").allTextContents()).toEqual(["Tell me about the bridge."]);
    expect(await page.locator("#chat-messages .message.assistant").count()).toBe(1);

    await page.click("#chat-reset");
    expect(await page.locator("#chat-messages .message").count()).toBe(0);
  });

  it("shows the answer while it streams, stops it, and the server frees the slot", async () => {
    await page.fill("#chat-max-tokens", "100000");
    await send("Tell me a very long story.");
    await page.locator("#chat-messages .streaming .content:not(:empty)").waitFor();
    await expect.poll(slots, SETTLE).toEqual({ active: 1, queued: 0 });
    // Text on the page while the model is still generating: rendered as it arrives, not at the end.
    const partial = (await page.textContent("#chat-messages .streaming .content")) ?? "";
    expect(partial.length).toBeGreaterThan(0);
    await page.click("#chat-stop");
    await page.locator("#chat-status", { hasText: "Stopped." }).waitFor();
    expect(await page.locator("#chat-messages .message.assistant .meta").last().textContent()).toMatch(/· stopped$/);
    await expect.poll(slots, SETTLE).toEqual({ active: 0, queued: 0 });
    expect(await page.isEnabled("#chat-send")).toBe(true);
    await screenshot(page, "local-chat-stopped");
    await page.click("#chat-reset");
  });

  it("shows model output containing <script> and <img onerror> as text, never as HTML", async () => {
    // A JSON schema whose only value is the hostile text: the real model, constrained by the
    // server's grammar, writes it (as a JSON string).
    await page.fill("#chat-max-tokens", "200");
    expect(await page.isVisible("#chat-schema")).toBe(false);
    await page.selectOption("#chat-format", "json_schema");
    expect(await page.isVisible("#chat-schema")).toBe(true);
    await page.fill("#chat-schema", JSON.stringify({ type: "string", const: HOSTILE }));
    await send("Say something dangerous.");
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();

    expect((await lastAnswer().textContent())?.trim()).toBe(JSON.stringify(HOSTILE));
    expect(await page.locator("#chat-messages script, #chat-messages img").count()).toBe(0);
    expect(await page.evaluate<boolean>('"pwned" in window')).toBe(false);
    await screenshot(page, "local-chat-hostile-output");
    await page.selectOption("#chat-format", "text");
    await page.click("#chat-reset");
  });

  it("renders Markdown in answers (sanitised), and never runs a javascript: link", async () => {
    const markdown = "Some **bold** and `code`, [a link](javascript:window.pwned=true) ![pic](http://example.invalid/x.png)";
    await page.selectOption("#chat-format", "json_schema");
    await page.fill("#chat-schema", JSON.stringify({ type: "string", const: markdown }));
    await send("Some Markdown, please.");
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();
    // The answer is a JSON string, so the Markdown is inside quotes: the inline parts still render.
    const answer = lastAnswer();
    expect(await answer.locator("strong").textContent()).toBe("bold");
    expect(await answer.locator("code").textContent()).toBe("code");
    const hrefs = await answer.locator("a").evaluateAll((links) => links.map((link) => link.getAttribute("href")));
    expect(hrefs).not.toContain("javascript:window.pwned=true");
    expect(await answer.locator("img").count()).toBe(0);
    expect(await page.evaluate<boolean>('"pwned" in window')).toBe(false);
    await page.selectOption("#chat-format", "text");
    await page.click("#chat-reset");
  });

  it("copies the chat as curl, JavaScript and Python, with a placeholder key; the curl and JavaScript run", async () => {
    await page.fill("#chat-max-tokens", "4");
    await send("Hello there.");
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();
    await page.click("#chat-code-panel summary");
    const code = async (language: string) => {
      await page.click(`#chat-code-${language}`);
      return (await page.textContent("#chat-code")) ?? "";
    };
    const curl = await code("curl");
    const javascript = await code("javascript");
    const python = await code("python");
    await screenshot(page, "local-copy-as-code");
    expect(curl).toContain(`curl ${server.url}/v1/chat/completions`);
    expect(curl).toContain('-H "Authorization: Bearer $MODELHOST_API_KEY"');
    expect(javascript).toContain("apiKey: process.env.MODELHOST_API_KEY");
    expect(python).toContain('api_key=os.environ["MODELHOST_API_KEY"]');
    expect(python).toContain('"content": "Hello there."');
    expect(python).toContain("max_tokens=4,");

    // They are real programs: run them as a user would, with the key in the environment.
    const env = { ...process.env, MODELHOST_API_KEY: "local-any-key" };
    const curlOutput = JSON.parse((await run("bash", ["-c", curl], { env })).stdout) as {
      choices: { message: { content: string } }[];
      model: string;
    };
    expect(curlOutput.model).toBe("tiny");
    expect(curlOutput.choices[0]?.message.content).toBeTypeOf("string");
    // Inside the repository (its ignored .cache/), so `import OpenAI from "openai"` finds the installed package.
    await mkdir(path.join(REPO, ".cache"), { recursive: true });
    const dir = await mkdtemp(path.join(REPO, ".cache", "snippet-"));
    try {
      await writeFile(path.join(dir, "snippet.mjs"), javascript);
      const { stdout } = await run(process.execPath, [path.join(dir, "snippet.mjs")], { env });
      expect(stdout.length).toBeGreaterThan(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await page.click("#chat-code-panel summary");
    await page.click("#chat-reset");
  });

  it("sends one prompt to two models side by side, both streaming, with TTFT and tokens/s under each", async () => {
    await page.click("nav a[href='#/compare']");
    await page.locator("#compare-input").waitFor();
    expect(await page.inputValue("#compare-model-a")).toBe("tiny");
    expect(await page.inputValue("#compare-model-b")).toBe("tiny-b");
    // Enough tokens that both streams overlap and their rates have a duration, however fast the model.
    await page.fill("#compare-max-tokens", "256");
    await page.fill("#compare-temperature", "0");
    // Both requests go out before either answer has ended: the two stream at the same time.
    const events: string[] = [];
    const models: string[] = [];
    const isChat = (request: Request) => request.url().endsWith("/playground/api/chat/completions");
    page.on("request", (request) => {
      if (!isChat(request)) return;
      models.push((request.postDataJSON() as { model: string }).model);
      events.push("sent");
    });
    // The page stops reading at [DONE], which Chromium may report as the request failing: either is its end.
    const ended = (request: Request) => void (isChat(request) && events.push("ended"));
    page.on("requestfinished", ended);
    page.on("requestfailed", ended);
    await page.fill("#compare-input", "Describe the town.");
    await page.click("#compare-send");
    await page.locator("#compare-status", { hasText: "Both answers complete." }).waitFor();
    expect(models.sort()).toEqual(["tiny", "tiny-b"]);
    await expect.poll(() => events, SETTLE).toEqual(["sent", "sent", "ended", "ended"]);
    for (const side of ["a", "b"]) {
      expect(await page.textContent(`#compare-pane-${side} h3`)).toBe(side === "a" ? "tiny" : "tiny-b");
      expect((await page.textContent(`#compare-pane-${side} .content`))?.length).toBeGreaterThan(0);
      expect(await page.textContent(`#compare-pane-${side} .stats`)).toMatch(
        /^TTFT \d[\d,]* ms · [\d.]+ tokens\/s · \d+ tokens · finish: (stop|length)$/,
      );
    }
    await screenshot(page, "local-side-by-side");
    expect(problems).toEqual([]);
  });

  it("stops both answers side by side, and the server frees both slots", async () => {
    const busy = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: { active: number }[] };
      return health.loaded.reduce((sum, model) => sum + model.active, 0);
    };
    await page.fill("#compare-max-tokens", "100000");
    await page.click("#compare-send");
    await expect.poll(busy, SETTLE).toBe(2);
    await page.click("#compare-stop");
    await page.locator("#compare-status", { hasText: "Stopped." }).waitFor();
    for (const side of ["a", "b"]) expect(await page.textContent(`#compare-pane-${side} .stats`)).toMatch(/· stopped$/);
    await expect.poll(busy, SETTLE).toBe(0);
  });

  it("keeps each page as it was when moving between them", async () => {
    await page.click("nav a[href='#/chat']");
    await page.locator("nav a[href='#/chat'][aria-current=page]").waitFor();
    expect(await page.isVisible("#compare-input")).toBe(false);
    await page.fill("#chat-input", "An unsent draft.");
    await page.click("nav a[href='#/compare']");
    await page.locator("#compare-input").waitFor({ state: "visible" });
    expect(await page.isVisible("#chat-input")).toBe(false);
    expect(await page.inputValue("#compare-input")).toBe("Describe the town.");
    await page.click("nav a[href='#/chat']");
    await page.locator("#chat-input").waitFor({ state: "visible" });
    expect(await page.inputValue("#chat-input")).toBe("An unsent draft.");
  });
});
