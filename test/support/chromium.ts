import { chromium, type Browser } from "playwright-core";
import { commandPath } from "./debianPackages.js";

/**
 * Debian's Chromium, headless, as the browser tests drive it (the playground's and the sample agent
 * app's). Without the background-networking switches Chromium keeps trying hosts this machine's
 * closed network refuses; `--no-sandbox` because the tests run as root.
 */
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
];

/** `extraArgs`: more command-line switches (e.g. `--host-resolver-rules` to give a test page a domain of its own). */
export function launchChromium(extraArgs: readonly string[] = []): Promise<Browser> {
  return chromium.launch({ executablePath: commandPath("chromium", "chromium"), headless: true, args: [...CHROMIUM_ARGS, ...extraArgs] });
}
