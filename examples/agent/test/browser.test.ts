// The page in real headless Chromium (Debian's `chromium`, driven by playwright-core), with the
// answer's pieces controlled by a scripted compatible service.
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../../../test/support/chromium.js";
import { needs } from "../../../test/support/debianPackages.js";
import { ingest } from "../src/ingest.js";
import { startRelay } from "./support/relay.js";
import { axis, startScriptedService, type ScriptedReply, type ScriptedService } from "./support/scriptedService.js";
import { createTestApp, type TestApp } from "./support/testApp.js";

const SCREENSHOT = path.resolve(import.meta.dirname, "../../../test-results/agent-page.png");
const PIECES = [
  "The keeper lit the lamp",
  " at dusk [1].\n",
  "Model output: <script>window.pwned = true</script>",
  " & <b>not bold</b>\r\nEnd.",
];

describe.skipIf(!needs("chromium"))("the page, in headless Chromium", () => {
  let browser: Browser;
  let service: ScriptedService;
  let app: TestApp;
  let relay: Awaited<ReturnType<typeof startRelay>>;

  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(() => browser?.close());

  async function setUp(script: ScriptedReply[]): Promise<void> {
    service = await startScriptedService(script, () => axis(0));
    app = createTestApp(service.baseURL);
    await ingest(app.writeDocs({ "keeper.md": "The keeper lit the lamp at dusk." }), {
      client: app.client,
      store: app.store,
      embeddingModel: "embed",
    });
    relay = await startRelay(app);
  }
  afterEach(async () => {
    await relay?.close();
    app?.close();
    await service?.close();
  });

  async function openPage() {
    const page = await browser.newPage({ viewport: { width: 900, height: 640 } });
    // Keep a handle on every EventSource the page opens, to check that it closes them. (Browser
    // code is passed as strings: this project type-checks for Node, without the DOM library.)
    await page.addInitScript({
      content: `window.openedSources = [];
        window.EventSource = class extends window.EventSource {
          constructor(...args) { super(...args); window.openedSources.push(this); }
        };`,
    });
    await page.goto(`${relay.url}/`);
    return page;
  }

  it("streams the answer as text (never HTML), shows the sources with scores and bands, and closes its EventSource on [DONE]", async () => {
    await setUp([
      { kind: "text", pieces: ["unstreamed"] },
      { kind: "text", pieces: PIECES },
    ]);
    const page = await openPage();
    try {
      await page.fill("#question", "Who lit the lamp?");
      await page.click("button[type=submit]");
      await page.locator("#status", { hasText: "Done." }).waitFor();

      expect(await page.textContent("#answer")).toBe(PIECES.join("").replace(/\r\n/g, "\n"));
      // Rendered as it streamed: one text node per piece, appended as each arrived.
      expect(await page.evaluate<number>('document.querySelector("#answer").childNodes.length')).toBe(PIECES.length);
      expect(await page.evaluate<number>('document.querySelectorAll("#answer script, #answer b").length')).toBe(0);
      expect(await page.evaluate<boolean>('"pwned" in window')).toBe(false);

      const source = page.locator("#sources li").first();
      expect(await source.locator(".source").textContent()).toMatch(/keeper\.md #0$/);
      expect(await source.locator(".score").textContent()).toBe("1.000 very strong");
      expect(await source.locator("blockquote").textContent()).toBe("The keeper lit the lamp at dusk.");

      const states = await page.evaluate<number[]>("window.openedSources.map((source) => source.readyState)");
      expect(states).toEqual([2]); // EventSource.CLOSED: no reconnect, no second question
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(service.chatRequests()).toHaveLength(2);
    } finally {
      await page.close();
    }
  });

  it("shows an error that arrives after the stream began", async () => {
    await setUp([
      { kind: "text", pieces: ["unstreamed"] },
      { kind: "text_then_error", pieces: ["Half an answer"] },
    ]);
    const page = await openPage();
    try {
      await page.fill("#question", "Who lit the lamp?");
      await page.click("button[type=submit]");
      await page.locator("#answer .error").waitFor();
      expect(await page.textContent("#answer .error")).toMatch(/^Error: .*the model crashed/);
      expect(await page.textContent("#answer")).toMatch(/^Half an answer/);
      const states = await page.evaluate<number[]>("window.openedSources.map((source) => source.readyState)");
      expect(states).toEqual([2]);
    } finally {
      await page.close();
    }
  });
});
