#!/usr/bin/env node
// CommonJS on purpose: this runs before Node's ES module loader first uses the libuv thread pool,
// so the pool size below still takes effect. node-llama-cpp decodes and samples on that pool; with
// more than one pool thread, consecutive decodes run on different threads, each of which gets its
// own team of OpenMP workers, and the teams compete for the cores (see docs/performance.md).
"use strict";
const { existsSync } = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

process.env.UV_THREADPOOL_SIZE ??= "1";

const entry = path.join(__dirname, "..", "dist", "cli", "main.js");
if (!existsSync(entry)) {
  process.stderr.write("modelhost: dist/ is missing; run `npm run build` (or `npm ci`) in the checkout first.\n");
  process.exit(1);
}
import(pathToFileURL(entry).href);
