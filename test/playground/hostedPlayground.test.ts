// Issue 13, the page in the hosted profile: real headless Chromium against the real server with
// generated test models. Sign-in (and a wrong password refused), chat and side by side in the
// session, a token created in the page and used with the official client, then revoked (401),
// the usage chart showing the calls just made, CSRF refusals, and sign-out.
import { createServer, type Server } from "node:http";
import OpenAI from "openai";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import type { TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { launchChromium } from "../support/chromium.js";
import { buildPage, type BuiltPage, screenshot, watchPage } from "./support.js";

const ACCOUNT = "alice";
const PASSWORD = "correct horse battery staple";
const tiers = { default: "free", tiers: { free: { requestsPerMinute: 100, tokensPerDay: 1_000_000 } } };
const SETTLE = { timeout: 10_000, interval: 200 };
const DAY_MS = 86_400_000;
/** The UTC date of a moment, as the page shows dates. */
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

describe.skipIf(!needs("chromium"))("the playground page, hosted profile, in headless Chromium", () => {
  let built: BuiltPage;
  let hosted: Hosted;
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  /** Chat requests this test file made, per model: what the usage chart must show. */
  const chats = { tiny: 0, "tiny-b": 0 };
  /** The UTC day before the first of them: with the day the chart is read, the days they may fall on. */
  let firstDay: string;

  beforeAll(async () => {
    firstDay = utcDay(Date.now());
    built = await buildPage();
    hosted = await openHosted({ tiers });
    await hosted.newAccount("free", { name: ACCOUNT, password: PASSWORD });
    const tiny = await testModelPath("tiny");
    server = await hosted.serve({ models: { tiny, "tiny-b": tiny }, playgroundDir: built.dir });
    browser = await launchChromium();
    // A zone 14 hours from UTC, where the local date is another day for most of it: the page shows
    // UTC (as the usage days and the expiry dates picked are) whatever the browser's zone.
    context = await browser.newContext({ viewport: { width: 1200, height: 800 }, timezoneId: "Pacific/Kiritimati" });
    page = await context.newPage();
    problems = watchPage(page, server.url);
    await page.goto(`${server.url}/playground/`);
  });
  afterAll(async () => {
    await browser?.close();
    await hosted?.close();
    await built?.remove();
  });

  const apiStatus = (script: string) => page.evaluate<number>(script);
  const tokenRows = () => page.locator("#token-list tbody tr[data-token-id]");
  // By the name cell alone: a row's text also holds the token's random prefix, and "mh_4cIDPJn…"
  // matched a filter for the text "ci" (case-insensitive) in one run.
  const tokenRow = (name: string) => tokenRows().filter({ has: page.locator("td:first-child", { hasText: new RegExp(`^${name}$`) }) });

  it("asks for a sign-in, and refuses a wrong password", async () => {
    await page.locator("#sign-in-form").waitFor();
    expect(await page.locator("nav").count()).toBe(0);
    await screenshot(page, "hosted-sign-in");

    await page.fill("#sign-in-account", ACCOUNT);
    await page.fill("#sign-in-password", "wrong password");
    await page.click("#sign-in-submit");
    await page.locator("#sign-in-error:not([hidden])").waitFor();
    expect(await page.textContent("#sign-in-error")).toMatch(/\S/);
    expect(await page.locator("nav").count()).toBe(0);
    await screenshot(page, "hosted-sign-in-refused");
  });

  it("signs in with the password: a session cookie, and every page", async () => {
    await page.fill("#sign-in-password", PASSWORD);
    await page.click("#sign-in-submit");
    await page.locator("nav").waitFor();
    expect(await page.locator("nav a").allTextContents()).toEqual(["Chat", "Side by side", "Tokens", "Usage"]);
    expect(await page.textContent("#account-name")).toBe(ACCOUNT);
    const cookies = await context.cookies(`${server.url}/playground/`);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: "Lax" });
  });

  it("chats in the session, streaming", async () => {
    await page.fill("#chat-max-tokens", "32");
    await page.fill("#chat-temperature", "0"); // greedy: the same answer, of more than one token, every run
    await page.fill("#chat-input", "Hello from the browser.");
    await page.click("#chat-send");
    await page.locator("#chat-status", { hasText: "Answer complete." }).waitFor();
    chats.tiny++;
    expect((await page.textContent("#chat-messages .message.assistant .content"))?.length).toBeGreaterThan(0);
    expect(await page.textContent("#chat-messages .message.assistant .meta")).toMatch(
      /^tiny · TTFT \d[\d,]* ms · [\d.]+ tokens\/s · \d+ tokens · finish: (stop|length)$/,
    );
    await screenshot(page, "hosted-chat");
  });

  it("streams side by side", async () => {
    await page.click("nav a[href='#/compare']");
    // Enough tokens that they arrive over several reads, however fast the model: a rate needs a duration.
    await page.fill("#compare-max-tokens", "256");
    await page.fill("#compare-temperature", "0");
    await page.fill("#compare-input", "Describe the river.");
    await page.click("#compare-send");
    await page.locator("#compare-status", { hasText: "Both answers complete." }).waitFor();
    chats.tiny++;
    chats["tiny-b"]++;
    for (const side of ["a", "b"])
      expect(await page.textContent(`#compare-pane-${side} .stats`)).toMatch(/^TTFT \d[\d,]* ms · [\d.]+ tokens\/s · \d+ tokens/);
    await screenshot(page, "hosted-side-by-side");
  });

  it("creates a token, shown once, that works with the official client; revoked, the client gets 401", async () => {
    await page.click("nav a[href='#/tokens']");
    await page.locator("#token-list").waitFor();
    await page.fill("#token-name", "laptop");
    await page.selectOption("#token-expiry", "30");
    const clickedAt = Date.now();
    await page.click("#token-create");
    await page.locator("#token-created:not([hidden])").waitFor();
    const token = (await page.textContent("#token-value")) ?? "";
    expect(token).toMatch(/^mh_[A-Za-z0-9]{38}$/);
    await screenshot(page, "hosted-token-created");

    const row = tokenRow("laptop");
    await row.waitFor();
    const prefix = ((await row.locator("td").nth(1).textContent()) ?? "").replace(/…$/, "");
    expect(token.startsWith(prefix)).toBe(true);
    expect(prefix.length).toBeLessThan(token.length);
    // Created between the click and now: 30 days on, either side of a UTC midnight the test may have crossed.
    const in30Days = [...new Set([clickedAt, Date.now()].map((at) => utcDay(at + 30 * DAY_MS)))].join("|");
    expect(await row.locator("td").nth(4).textContent()).toMatch(new RegExp(`^(${in30Days}) \\d\\d:\\d\\d$`));
    expect(await page.locator("#token-list thead th").allTextContents()).toEqual([
      "Name",
      "Prefix",
      "Created (UTC)",
      "Last used (UTC)",
      "Expires (UTC)",
      "Status",
      "",
    ]);
    expect(await row.locator("td").nth(3).textContent()).toBe("Never");

    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: token, maxRetries: 0 });
    const reply = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
    chats.tiny++;
    expect(reply.usage?.completion_tokens).toBe(2);

    // Shown once: dismissed, it is gone from the page, and the list never had it.
    await page.click("#token-created button:has-text('Done')");
    expect(await page.isHidden("#token-created")).toBe(true);
    expect(await page.content()).not.toContain(token);

    // Tokens that never expire, and until a date (the end of that UTC day, as the CLI's --expires).
    await page.fill("#token-name", "ci");
    await page.selectOption("#token-expiry", "never");
    await page.click("#token-create");
    await tokenRow("ci").waitFor();
    expect(await tokenRow("ci").locator("td").nth(4).textContent()).toBe("Never");
    await page.fill("#token-name", "until-2030");
    expect(await page.isVisible("#token-expiry-date")).toBe(false);
    await page.selectOption("#token-expiry", "custom");
    await page.fill("#token-expiry-date", "2030-01-15");
    await page.click("#token-create");
    await tokenRow("until-2030").waitFor();
    expect(await tokenRow("until-2030").locator("td").nth(4).textContent()).toBe("2030-01-15 23:59");

    // The list says when "laptop" was last used (the server writes last uses every 5 seconds).
    await expect
      .poll(async () => {
        await page.click("#token-refresh");
        return row.locator("td").nth(3).textContent();
      }, SETTLE)
      .toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d$/);
    await screenshot(page, "hosted-tokens");

    page.once("dialog", (dialog) => void dialog.accept());
    await row.getByRole("button", { name: "Revoke laptop" }).click();
    await expect.poll(() => row.locator(".token-status").textContent(), SETTLE).toMatch(/^Revoked /);
    expect(await row.locator(".token-status").textContent()).toMatch(/^Revoked \d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
    const refused = await client.models.list().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
    await screenshot(page, "hosted-token-revoked");
  });

  it("charts the calls just made, per model, and today's remaining limits", async () => {
    await page.click("nav a[href='#/usage']");
    // One UTC day, or two if the run crossed midnight: the calls are counted on the day each was made.
    const days = [...new Set([firstDay, utcDay(Date.now())])];
    const bar = (chart: string, model: string, day: string) =>
      page.locator(`#chart-${chart} rect.bar[data-date='${day}'][data-model='${model}']`);
    const value = async (chart: string, model: string, day: string) =>
      (await bar(chart, model, day).count()) === 0 ? 0 : Number(await bar(chart, model, day).getAttribute("data-value"));
    const total = async (chart: string, model: string) =>
      (await Promise.all(days.map((day) => value(chart, model, day)))).reduce((sum, each) => sum + each, 0);
    // The ledger is written as requests end; Refresh until it has them all.
    await expect
      .poll(async () => {
        await page.click("#usage-refresh");
        return Promise.all([total("requests", "tiny"), total("requests", "tiny-b")]);
      }, SETTLE)
      .toEqual([chats.tiny, chats["tiny-b"]]);
    expect(await total("tokens", "tiny")).toBeGreaterThan(0);
    for (const day of days) {
      const requests = await value("requests", "tiny", day);
      if (requests > 0)
        expect(await bar("requests", "tiny", day).locator("title").textContent()).toBe(`${day} · tiny: ${requests} requests`);
    }
    expect(await page.locator("#usage-legend li").allTextContents()).toEqual([" tiny", " tiny-b"]);
    const limits = (await page.textContent("#usage-limits")) ?? "";
    expect(limits).toMatch(/Requests in the last minute\d+ of 100 left/);
    expect(limits).toMatch(/Tokens today \(UTC\)[\d,]+ of 1,000,000 left/);
    await screenshot(page, "hosted-usage");
  });

  it("refuses a state-changing call without the CSRF header, or from another origin", async () => {
    await page.click("nav a[href='#/tokens']");
    const before = await tokenRows().count();
    const post = `fetch("/playground/api/tokens", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "forged", expires_at: null }) })`;
    expect(await apiStatus(`${post}.then((response) => response.status)`)).toBe(403);

    // A page on another origin of the same site (127.0.0.1, another port) that posts a form to the
    // playground, as a request forgery would. Same site, so the browser sends the SameSite=Lax
    // session cookie with it: only the CSRF check stands in the way.
    const evil = await startOtherOrigin(`${server.url}/playground/api/tokens`);
    try {
      const other = await context.newPage();
      const forged = other.waitForResponse(`${server.url}/playground/api/tokens`);
      await other.goto(evil.url);
      const response = await forged;
      const sent = await response.request().allHeaders();
      expect(sent.cookie).toMatch(/(^|; )modelhost_session=mhs_/);
      expect(sent.origin).toBe(new URL(evil.url).origin);
      expect(response.status()).toBe(403);
      expect(await response.json()).toMatchObject({
        error: { code: "csrf_rejected", message: expect.stringContaining(`comes from ${new URL(evil.url).origin}`) },
      });
      await other.waitForURL(`${server.url}/playground/api/tokens`);
      expect(await other.textContent("body")).toMatch(/"error"/);
      await other.close();
    } finally {
      await new Promise((resolve) => evil.server.close(resolve));
    }
    await page.click("#token-refresh");
    await expect.poll(() => tokenRows().count(), SETTLE).toBe(before);
    expect(await page.locator("#token-list", { hasText: "forged" }).count()).toBe(0);
    expect((await hosted.store.listTokens()).map((token) => token.name)).not.toContain("forged");
  });

  it("signs out: the session ends on the server", async () => {
    const [cookie] = await context.cookies(`${server.url}/playground/`);
    await page.click("#sign-out");
    await page.locator("#sign-in-form").waitFor();
    expect(await page.textContent("main")).toContain("You have signed out.");
    expect(await apiStatus(`fetch("/playground/api/tokens").then((response) => response.status)`)).toBe(401);
    // The old cookie, replayed, is refused too: the session is gone, not only the cookie.
    const replayed = await fetch(`${server.url}/playground/api/tokens`, { headers: { cookie: `${cookie?.name}=${cookie?.value}` } });
    expect(replayed.status).toBe(401);
    await screenshot(page, "hosted-signed-out");
  });

  it("signs in with a one-time link, which works once", async () => {
    const { secret } = await hosted.signIns.createSignInLink(ACCOUNT);
    const link = `${server.url}/playground/sign-in?link=${secret}`;
    await page.goto(link);
    await page.waitForURL(`${server.url}/playground/`);
    await page.locator("nav").waitFor();
    expect(await page.textContent("#account-name")).toBe(ACCOUNT);
    expect(page.url()).not.toContain(secret);
    expect(problems).toEqual([]);

    const again = await page.goto(link);
    expect(again?.status()).toBe(401);
  });
});

/** A server on 127.0.0.1 (the test server's host), on another port, whose page auto-submits a form to `target`. */
async function startOtherOrigin(target: string): Promise<{ server: Server; url: string }> {
  const html = `<!doctype html><form method="post" action="${target}" enctype="text/plain"><input name='{"name":"forged","expires_at":null,"x":"' value='"}'></form><script>document.forms[0].submit()</script>`;
  const server = createServer((_request, response) => response.writeHead(200, { "content-type": "text/html" }).end(html));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { server, url: `http://127.0.0.1:${address.port}/` };
}
