#!/usr/bin/env node
// The `modelhost` command: runs the built CLI, or says how to build it.
"use strict";
const { existsSync } = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

const entry = path.join(__dirname, "..", "dist", "cli", "main.js");
if (!existsSync(entry)) {
  process.stderr.write("modelhost: dist/ is missing; run `npm run build` (or `npm ci`) in the checkout first.\n");
  process.exit(1);
}
import(pathToFileURL(entry).href);
