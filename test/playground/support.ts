// What the playground's browser tests share: the page built from web/ by Vite (into a directory of
// their own, so a stale web/dist never hides a change), screenshots, and the page's watchers (Chromium: ../support/chromium.ts).
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { build } from "vite";
import { launchChromium } from "../support/chromium.js";

export const REPO = path.resolve(import.meta.dirname, "../..");
const SCREENSHOTS = path.join(REPO, "test-results");
export interface BuiltPage {
  dir: string;
  remove(): Promise<void>;
}

/** `vite build web`, as `npm run build` runs it, into a temporary directory. */
export async function buildPage(): Promise<BuiltPage> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-playground-"));
  const root = path.join(REPO, "web");
  await build({ root, configFile: path.join(root, "vite.config.ts"), logLevel: "silent", build: { outDir: dir, emptyOutDir: true } });
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** Saves test-results/playground-<name>.png, the whole page. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `playground-${name}.png`), fullPage: true });
}

/**
 * Fails the test on anything the page logs as an error or throws, and on any request that leaves
 * the server's origin (the page must work with no external network).
 */
export function watchPage(page: Page, origin: string): string[] {
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    // A refused request (401, 403, 429) logs an error line in Chromium: those are the tests' own doing.
    if (message.type() === "error" && !/status of (401|403|429)/.test(message.text())) problems.push(`console: ${message.text()}`);
  });
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(origin) && !url.startsWith("data:")) problems.push(`request outside the origin: ${url}`);
  });
  return problems;
}

export interface OpenedPlayground {
  browser: Browser;
  page: Page;
  /** What watchPage collects. */
  problems: string[];
}

/** Chromium with one 1200 × 800 page, watched (watchPage), opened at the server's playground. */
export async function openPlayground(serverUrl: string): Promise<OpenedPlayground> {
  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const problems = watchPage(page, serverUrl);
  await page.goto(`${serverUrl}/playground/`);
  return { browser, page, problems };
}

/** Model output that would run script if it were ever inserted as HTML. */
export const HOSTILE = "<script>window.pwned = true</script> <img src=x onerror=window.pwned=true>";
