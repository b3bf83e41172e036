import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { errorCodes } from "../../src/core/ServerError.js";
import { errorStatus } from "../../src/http/errorStatus.js";

describe("docs/errors.md", () => {
  const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");

  it.each(errorCodes)("documents %s with its status", (code) => {
    const row = doc.split("\n").find((line) => line.startsWith(`| \`${code}\``));
    expect(row, `a table row for ${code}`).toBeDefined();
    expect(row).toContain(`| ${errorStatus[code]} |`);
  });

  it("documents no code that does not exist", () => {
    const documented = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((match) => match[1]);
    expect(documented.sort()).toEqual([...errorCodes].sort());
  });
});
