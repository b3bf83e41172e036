#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm ci` through the `prepare` script, or `npm run build`).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const entry = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write("modelhost: dist/ is missing; run `npm run build` (or `npm ci`) in the checkout first.\n");
  process.exit(1);
}
await import(entry.href);
