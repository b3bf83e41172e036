import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { accessErrorCodes } from "../../src/access/AccessError.js";
import { UsageError } from "../../src/cli/UsageError.js";
import { ConfigError } from "../../src/config/loadConfig.js";
import { errorCodes } from "../../src/core/ServerError.js";
import { errorStatus } from "../../src/http/errorStatus.js";

/** The codes only the command line meets; it exits with status 2 for each. */
const commandCodes = [new UsageError("").code, new ConfigError("").code, ...accessErrorCodes];

describe("docs/errors.md", () => {
  const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");
  const rowOf = (code: string) => doc.split("\n").find((line) => line.startsWith(`| \`${code}\``));

  it.each(errorCodes)("documents %s with its status", (code) => {
    const row = rowOf(code);
    expect(row, `a table row for ${code}`).toBeDefined();
    expect(row).toContain(`| ${errorStatus[code]} |`);
  });

  it.each(commandCodes)("documents the command-line error %s with exit status 2", (code) => {
    const row = rowOf(code);
    expect(row, `a table row for ${code}`).toBeDefined();
    expect(row).toContain("| 2 |");
  });

  it("documents no code that does not exist", () => {
    const documented = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((match) => match[1]);
    expect(documented.sort()).toEqual([...errorCodes, ...commandCodes].sort());
  });
});
