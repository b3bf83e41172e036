// Issue 28 §1, as an attacker would try it: a real page in headless Chromium, on another origin
// (http://evil.example, mapped to 127.0.0.1 inside the browser), fires every request a page can
// send to the local runtime without asking first — `fetch` with `mode: "no-cors"`, a form POST,
// `navigator.sendBeacon` — and the preflighted `fetch` too, at model management, generation and the
// playground's API. Against the default settings nothing changes on disk and nothing generates;
// with the page's origin in --cors-origins the same page does change things (so the page works and
// the first result means something).
import { lstat, readdir, readFile, symlink } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";
import { launchChromium } from "../support/chromium.js";

const EVIL_HOST = "evil.example";

/** The attempts: a path, its method, and a body that would do harm if it ran. */
function attempts(pullUrl: string): Array<{ path: string; method: string; body: unknown }> {
  const messages = [{ role: "user", content: "hi" }];
  return [
    { path: "/api/pull", method: "POST", body: { model: pullUrl, stream: false } },
    { path: "/api/copy", method: "POST", body: { source: "tiny", destination: "pwned" } },
    { path: "/api/delete", method: "DELETE", body: { model: "victim" } },
    { path: "/api/generate", method: "POST", body: { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } } },
    { path: "/v1/chat/completions", method: "POST", body: { model: "tiny", messages, max_tokens: 2 } },
    { path: "/v1/responses", method: "POST", body: { model: "tiny", input: "hi", max_output_tokens: 16 } },
    { path: "/playground/api/chat/completions", method: "POST", body: { model: "tiny", messages, max_tokens: 2 } },
  ];
}

/** Requests the page sends per attempt: no-cors fetch, beacon, form, and the preflight of a CORS fetch. */
const SENT_PER_ATTEMPT = 4;

/**
 * The attacker's page. A text/plain form sends `name=value`: a name that is the JSON body less its
 * closing brace plus `,"x":"`, and the value `"}`, make that a JSON object the server would parse.
 */
function attackPage(target: string, pullUrl: string): string {
  const script = `
    const target = ${JSON.stringify(target)};
    const attempts = ${JSON.stringify(attempts(pullUrl))};
    const settled = [];
    for (const [index, { path, method, body }] of attempts.entries()) {
      const json = JSON.stringify(body);
      const url = target + path;
      // Simple requests: no preflight, the browser sends them and hides only the answer.
      settled.push(fetch(url, { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: json }).catch(() => {}));
      navigator.sendBeacon(url, new Blob([json], { type: "text/plain" }));
      const frame = document.createElement("iframe");
      frame.name = "frame" + index;
      document.body.append(frame);
      settled.push(new Promise((resolve) => { frame.onload = resolve; setTimeout(resolve, 5000); }));
      const form = document.createElement("form");
      form.method = "post";
      form.enctype = "text/plain";
      form.action = url;
      form.target = frame.name;
      const input = document.createElement("input");
      input.name = json.slice(0, -1) + ',"x":"';
      input.value = '"}';
      form.append(input);
      document.body.append(form);
      form.submit();
      // A CORS request (JSON, or DELETE): the browser asks first, and sends it only if allowed.
      settled.push(fetch(url, { method, headers: { "content-type": "application/json" }, body: json }).catch(() => {}));
    }
    Promise.all(settled).then(() => { document.title = "done"; });
  `;
  return `<!doctype html><title>running</title><body><script>${script}</script></body>`;
}

/** Sum of modelhost_http_requests_total over the series that `status` selects (the test's own /metrics reads left out). */
async function requestCount(server: TestServer, status: (status: number) => boolean): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return [...text.matchAll(/^modelhost_http_requests_total\{([^}]*)\} (\d+)/gm)]
    .filter((match) => !match[1]!.includes('route="/metrics"') && status(Number(/status="(\d+)"/.exec(match[1]!)?.[1])))
    .reduce((sum, match) => sum + Number(match[2]), 0);
}
const refused = (status: number) => status === 403;
const answered = (status: number) => status !== 403;

async function generations(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return [...text.matchAll(/^modelhost_generations_total\{[^}]*\} (\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

/** Everything in the models directory: names, kinds, sizes, times, and the manifest's text. */
async function diskState(modelsDir: string): Promise<string> {
  const entries = await readdir(modelsDir);
  const described = await Promise.all(
    entries.sort().map(async (name) => {
      const stats = await lstat(path.join(modelsDir, name));
      const text = name === "models.json" ? await readFile(path.join(modelsDir, name), "utf8") : "";
      return `${name} ${stats.isSymbolicLink() ? "link" : "file"} ${stats.size} ${stats.mtimeMs} ${text}`;
    }),
  );
  return described.join("\n");
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

describe.skipIf(!needs("chromium"))("a page of another origin, in headless Chromium, against the local runtime", () => {
  let browser: Browser;
  let pages: Server;
  let pagePort: number;
  let pullTarget: Server;
  let pullHits = 0;
  let pullUrl: string;
  const html = new Map<string, string>();

  beforeAll(async () => {
    pullTarget = createServer((_request, response) => {
      pullHits++;
      response.end("GGUF");
    });
    pullUrl = `http://127.0.0.1:${await listen(pullTarget)}/any.gguf`;
    pages = createServer((request, response) =>
      response.writeHead(200, { "content-type": "text/html" }).end(html.get(request.url ?? "") ?? ""),
    );
    pagePort = await listen(pages);
    browser = await launchChromium([`--host-resolver-rules=MAP ${EVIL_HOST} 127.0.0.1`]);
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => pages?.close(resolve));
    await new Promise((resolve) => pullTarget?.close(resolve));
  });

  /** Serves the attack on `server` at http://evil.example:<port>/<name> and runs it in a fresh page. */
  async function attack(server: TestServer, name: string): Promise<void> {
    html.set(`/${name}`, attackPage(server.url, pullUrl));
    const page = await browser.newPage();
    await page.goto(`http://${EVIL_HOST}:${pagePort}/${name}`);
    expect(new URL(page.url()).hostname).toBe(EVIL_HOST);
    await page.waitForFunction('document.title === "done"', undefined, { timeout: 30_000 });
    await page.close();
  }

  async function serverWith(corsOrigins?: string[]): Promise<TestServer> {
    const tiny = await testModelPath("tiny");
    const server = await startTestServer({ models: { tiny }, ...(corsOrigins ? { config: { corsOrigins } } : {}) });
    await symlink(tiny, path.join(server.modelsDir, "victim.gguf"));
    return server;
  }

  it("changes nothing on disk and runs no generation with the default settings", async () => {
    const server = await serverWith();
    try {
      const before = {
        disk: await diskState(server.modelsDir),
        generations: await generations(server),
        refused: await requestCount(server, refused),
        answered: await requestCount(server, answered),
      };
      await attack(server, "default");
      // Beacons go out on the browser's own schedule: wait until every request has been answered.
      const expected = before.refused + attempts(pullUrl).length * SENT_PER_ATTEMPT;
      await expect.poll(() => requestCount(server, refused), { timeout: 15_000, interval: 100 }).toBeGreaterThanOrEqual(expected);
      // Every request the page sent was refused: none got any other answer.
      expect(await requestCount(server, answered)).toBe(before.answered);
      expect(await diskState(server.modelsDir)).toBe(before.disk);
      expect(await generations(server)).toBe(before.generations);
      expect(pullHits).toBe(0);
      expect((await server.client.models.list()).data.map((model) => model.id).sort()).toEqual(["tiny", "victim"]);
    } finally {
      await server.close();
    }
  });

  it("does change things when the page's origin is in --cors-origins", async () => {
    const server = await serverWith([`http://${EVIL_HOST}:*`]);
    try {
      const before = { disk: await diskState(server.modelsDir), generations: await generations(server) };
      await attack(server, "allowed");
      await expect.poll(() => generations(server), { timeout: 15_000, interval: 100 }).toBeGreaterThanOrEqual(before.generations + 3);
      const ids = async () => (await server.client.models.list()).data.map((model) => model.id);
      await expect.poll(ids, { timeout: 15_000, interval: 100 }).toContain("pwned");
      await expect.poll(ids, { timeout: 15_000, interval: 100 }).not.toContain("victim");
      expect(await diskState(server.modelsDir)).not.toBe(before.disk);
    } finally {
      await server.close();
    }
  });
});
