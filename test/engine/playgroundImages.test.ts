// Issue 33, the playground: a message in the Chat page can carry images for a model that reads
// them. Real headless Chromium against the real server on the native engine (the prebuilt
// llama.cpp binaries read no images), with the tiny test model paired with a tiny LLaVA projector
// as "tiny-vision", and the same model without one as "tiny".
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { encodePng } from "../support/images.js";
import { ensureNativeEngine } from "../support/nativeEngine.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { buildPage, type BuiltPage, openPlayground, REPO, screenshot } from "../playground/support.js";

const run = promisify(execFile);
const SETTLE = { timeout: 10_000, interval: 50 };
const CHAT_URL = "/playground/api/chat/completions";

/** A 48 × 40 picture, red with a dark diagonal stripe pattern (the projector sees any size). */
const RED_PNG = encodePng(48, 40, (x, y) => ((x + y) % 7 ? [230, 30, 30] : [0, 0, 0]));
const dataUrl = (bytes: Buffer, type = "image/png") => `data:${type};base64,${bytes.toString("base64")}`;

interface Completion {
  choices: { message: { content: string } }[];
  usage: { prompt_tokens: number };
}
interface SentBody {
  model: string;
  messages: { role: string; content: string | { type: string; text?: string; image_url?: { url: string } }[] }[];
  [field: string]: unknown;
}

describe.skipIf(!needs("chromium", ...engineBuildTools))("the playground's images, in headless Chromium (native engine)", () => {
  let dir: string;
  let built: BuiltPage;
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    await ensureNativeEngine();
    built = await buildPage();
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-playground-images-"));
    const projector = path.join(dir, "projector.gguf");
    await projectorWriter(TINY_PROJECTORS.mlp, 7).write(projector);
    const tiny = await testModelPath("tiny");
    // The projector is linked beside the model as mmproj-tiny-vision-f16.gguf: the registry pairs it with tiny-vision by name.
    server = await startTestServer({
      models: { "tiny-vision": tiny, "mmproj-tiny-vision-f16": projector, tiny },
      playgroundDir: built.dir,
      config: { engine: "native", threads: 2 },
    });
    ({ browser, page, problems } = await openPlayground(server.url));
    await page.locator("#chat-input").waitFor();
  }, 40 * 60_000);
  // Every test: nothing the page logged as an error or threw, no request off the origin.
  afterEach(() => {
    expect(problems.splice(0)).toEqual([]);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await built?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Chromium logs each refused request as a console error: `count` of them are the test's own doing. */
  const expectRefused = async (count: number) => {
    const refused = () => problems.filter((problem) => /status of 400\b/.test(problem));
    await expect.poll(() => refused().length, SETTLE).toBe(count);
    for (const problem of refused()) problems.splice(problems.indexOf(problem), 1);
  };
  const attach = (name: string, buffer: Buffer, mimeType = "image/png") =>
    page.setInputFiles("#chat-image-input", { name, mimeType, buffer });
  /** Sends `text` (and what is attached); resolves to the body the page sent. */
  const send = async (text: string): Promise<SentBody> => {
    const request = page.waitForRequest((candidate) => candidate.url().endsWith(CHAT_URL));
    await page.fill("#chat-input", text);
    await page.click("#chat-send");
    return (await request).postDataJSON() as SentBody;
  };
  /** The page's request, as a plain (not streamed) request to the API. */
  const replay = async (body: SentBody) => {
    const { stream: _stream, stream_options: _options, ...plain } = body;
    return postJson(`${server.url}/v1/chat/completions`, plain);
  };
  const answered = () => page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();

  it("offers Attach image for the model that reads images, and not for the one that reads none", async () => {
    expect(await page.locator("#chat-model option").allTextContents()).toEqual(["tiny", "tiny-vision"]);
    await page.selectOption("#chat-model", "tiny");
    expect(await page.isDisabled("#chat-attach")).toBe(true);
    expect(await page.getAttribute("#chat-attach", "title")).toBe("tiny reads no images (it has no vision projector).");
    await page.selectOption("#chat-model", "tiny-vision");
    expect(await page.isEnabled("#chat-attach")).toBe(true);
    expect(await page.getAttribute("#chat-attach", "title")).toBeNull();
    // The button opens the file dialog of an input that offers the formats the server takes.
    expect(await page.getAttribute("#chat-image-input", "accept")).toBe("image/png,image/jpeg,image/gif,image/webp,image/bmp");
    const chooser = page.waitForEvent("filechooser");
    await page.click("#chat-attach");
    expect((await chooser).isMultiple()).toBe(true);
  });

  it("sends an attached image as an image_url part the model reads, and shows it in the user's turn", async () => {
    await page.fill("#chat-max-tokens", "8");
    await page.fill("#chat-temperature", "0");
    await attach("red.png", RED_PNG);
    const preview = page.locator("#chat-attachments img");
    await preview.waitFor();
    expect(await preview.getAttribute("alt")).toBe("red.png");
    expect(await preview.getAttribute("src")).toBe(dataUrl(RED_PNG));
    await screenshot(page, "images-attached");

    const body = await send("What is in this picture?");
    expect(body.model).toBe("tiny-vision");
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is in this picture?" },
          { type: "image_url", image_url: { url: dataUrl(RED_PNG) } },
        ],
      },
    ]);
    await answered();
    expect((await page.textContent("#chat-messages .message.assistant .content"))?.length).toBeGreaterThan(0);
    const sent = page.locator("#chat-messages .message.user img");
    expect(await sent.count()).toBe(1);
    expect(await sent.getAttribute("src")).toBe(dataUrl(RED_PNG));
    expect(await sent.getAttribute("alt")).toBe("red.png");
    expect(await page.textContent("#chat-messages .message.user .content")).toBe("What is in this picture?");
    // The composer is empty again.
    expect(await page.isHidden("#chat-attachments")).toBe(true);
    await screenshot(page, "images-sent");

    // The server read the image the page sent: its 16 image tokens are in the prompt.
    const withImage = (await (await replay(body)).json()) as Completion;
    const textOnly = (await (
      await replay({ ...body, messages: [{ role: "user", content: "What is in this picture?" }] })
    ).json()) as Completion;
    expect(withImage.usage.prompt_tokens - textOnly.usage.prompt_tokens).toBeGreaterThanOrEqual(16);
  });

  it("puts the last message's image back with its text on Edit, and sends it again", async () => {
    await page.click("#chat-edit");
    expect(await page.inputValue("#chat-input")).toBe("What is in this picture?");
    expect(await page.getAttribute("#chat-attachments img", "src")).toBe(dataUrl(RED_PNG));
    expect(await page.locator("#chat-messages .message").count()).toBe(0);
    // An image needs no text.
    const body = await send("");
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "image_url", image_url: { url: dataUrl(RED_PNG) } }] }]);
    await answered();
    expect(await page.locator("#chat-messages .message.user img").count()).toBe(1);
    await page.click("#chat-reset");
  });

  it("attaches an image pasted into the message, shows its name as text only, and removes it", async () => {
    const hostileName = "<img src=x onerror=window.pwned=true>.png";
    // A paste as Chromium delivers one from the clipboard: a ClipboardEvent whose data holds the file.
    // (The tests' TypeScript has no DOM types: the page's side is given as source.)
    await page.evaluate(`(() => {
      const bytes = Uint8Array.from(atob(${JSON.stringify(RED_PNG.toString("base64"))}), (char) => char.charCodeAt(0));
      const data = new DataTransfer();
      data.items.add(new File([bytes], ${JSON.stringify(hostileName)}, { type: "image/png" }));
      document.querySelector("#chat-input").dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true }));
    })()`);
    const preview = page.locator("#chat-attachments img");
    await preview.waitFor();
    expect(await preview.getAttribute("alt")).toBe(hostileName);
    expect(await page.locator("#chat-attachments img").count()).toBe(1);
    expect(await page.evaluate<boolean>('"pwned" in window')).toBe(false);
    await page.click(`#chat-attachments button[aria-label="Remove ${hostileName}"]`);
    expect(await page.isHidden("#chat-attachments")).toBe(true);
    expect(await page.locator("#chat-attachments img").count()).toBe(0);
  });

  it("refuses a file over 10 MiB in the page, before sending anything", async () => {
    let sent = 0;
    const count = (request: { url(): string }) => void (request.url().endsWith(CHAT_URL) && sent++);
    page.on("request", count);
    await attach("huge.png", Buffer.alloc(12 * 1024 * 1024));
    await page.locator("#chat-error", { hasText: "huge.png is 12.0 MiB: an image may be at most 10.0 MiB." }).waitFor();
    expect(await page.isHidden("#chat-attachments")).toBe(true);
    page.off("request", count);
    expect(sent).toBe(0);
  });

  const REFUSED: Array<[string, string, Buffer, string, RegExp]> = [
    ["a file that is no image", "notes.txt", Buffer.from("Shopping: bread, milk.\n"), "text/plain", /the image is not accepted/],
    ["a PNG cut short", "cut.png", RED_PNG.subarray(0, RED_PNG.length - 20), "image/png", /cut short/],
  ];

  it.each(REFUSED)("shows the server's 400 for %s, and goes on working", async (_case, name, bytes, type, reason) => {
    await attach(name, bytes, type);
    await page.locator("#chat-attachments img").waitFor();
    const body = await send("What is this?");
    const error = page.locator("#chat-error");
    await error.waitFor();
    await expectRefused(1);
    // Word for word what the server answers to the request the page sent.
    const refusal = await replay(body);
    expect(refusal.status).toBe(400);
    const { message } = ((await refusal.json()) as { error: { message: string } }).error;
    expect(message).toMatch(reason);
    expect(await error.textContent()).toBe(message);
    await screenshot(page, `images-refused-${name}`);

    // Nothing was sent into the conversation: the message and the file wait in the composer.
    expect(await page.locator("#chat-messages .message").count()).toBe(0);
    expect(await page.inputValue("#chat-input")).toBe("What is this?");
    expect(await page.getAttribute("#chat-attachments img", "alt")).toBe(name);
    await page.click(`#chat-attachments button[aria-label="Remove ${name}"]`);
    await page.click("#chat-send");
    await answered();
    expect(await page.isHidden("#chat-error")).toBe(true);
    expect(await page.locator("#chat-messages .message").count()).toBe(2);
    await page.click("#chat-reset");
  });

  it("copies a chat with an image as code that reads the image from its file; the curl and JavaScript run", async () => {
    await attach("red.png", RED_PNG);
    await page.locator("#chat-attachments img").waitFor();
    await page.fill("#chat-input", "What is in this picture?");
    await page.click("#chat-code-panel summary");
    const code = async (language: string) => {
      await page.click(`#chat-code-${language}`);
      return (await page.textContent("#chat-code")) ?? "";
    };
    const [curl, javascript, python] = [await code("curl"), await code("javascript"), await code("python")];
    await screenshot(page, "images-copy-as-code");
    // The file, not its base64: the snippets stay short whatever the image's size.
    for (const snippet of [curl, javascript, python]) expect(snippet).not.toContain(RED_PNG.toString("base64").slice(0, 40));
    expect(curl).toContain(`IMAGE_1='data:image/png;base64,'"$(base64 < 'red.png' | tr -d '\\n')"`);
    expect(javascript).toContain(`const image1 = "data:image/png;base64," + readFileSync("red.png", "base64");`);
    expect(python).toContain(`image_1 = "data:image/png;base64," + base64.b64encode(Path("red.png").read_bytes()).decode()`);
    expect(python).toContain(`"url": image_1,`);

    // What the request is: the draft in the composer, with the image inline.
    const expected = (await (
      await postJson(`${server.url}/v1/chat/completions`, {
        model: "tiny-vision",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is in this picture?" },
              { type: "image_url", image_url: { url: dataUrl(RED_PNG) } },
            ],
          },
        ],
        temperature: 0,
        max_tokens: 8,
        top_p: 1,
      })
    ).json()) as Completion;
    // Run as a user would: the image saved beside the snippet, the key in the environment. Inside
    // the repository (its ignored .cache/), so `import OpenAI from "openai"` finds the installed package.
    await mkdir(path.join(REPO, ".cache"), { recursive: true });
    const snippets = await mkdtemp(path.join(REPO, ".cache", "snippet-"));
    try {
      await writeFile(path.join(snippets, "red.png"), RED_PNG);
      await writeFile(path.join(snippets, "snippet.mjs"), javascript);
      const options = { cwd: snippets, env: { ...process.env, MODELHOST_API_KEY: "local-any-key" } };
      const fromCurl = JSON.parse((await run("bash", ["-c", curl], options)).stdout) as Completion;
      expect(fromCurl.usage.prompt_tokens).toBe(expected.usage.prompt_tokens);
      expect(fromCurl.choices[0]!.message.content).toBe(expected.choices[0]!.message.content);
      const fromJavascript = (await run(process.execPath, ["snippet.mjs"], options)).stdout;
      expect(fromJavascript).toBe(`${expected.choices[0]!.message.content}\n`);
    } finally {
      await rm(snippets, { recursive: true, force: true });
    }
    await page.click("#chat-code-panel summary");
  });
});
