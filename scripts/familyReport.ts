// The real model families' table (issue 31): runs the family tests and tabulates their results, one
// row per template, a column per check. A measurement of where the families stand, for notes and docs.
//
//   npx tsx scripts/familyReport.ts [--json FILE]
//
// Columns, each "passed/run" for that template's tests (— where the family has no such test):
// - prompt: conversation shapes rendered through POST /apply-template exactly as transformers renders
//   them (test/http/familyPrompts.test.ts; cases the template library renders otherwise are counted
//   in test/unit/chatTemplateReferences.test.ts instead);
// - token ids: the chat prompt's ids equal llama-tokenize's (test/engine/tokenCrossCheck.test.ts);
// - forced calls: `required` and named calls written in the family's syntax and read back, streamed and
//   not, their round trip through the template, the other three APIs, and /api/show's capabilities
//   (test/http/familyToolCalls.test.ts);
// - auto call: a call the model opens itself, in four APIs, streamed and not (test/http/familyReplies.test.ts);
// - thought: a thought split from the answer in four APIs, streamed and not (test/http/familyReplies.test.ts);
// - thinking off: told not to think, the prompt the template ends otherwise, and no thought comes back
//   (familyReplies.test.ts; — where the template's switch changes only its system text or none exists).
// "n/a" where the template has no thought format (chatFormatOf finds none).
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { promisify } from "node:util";
import { chatFormatOf } from "../src/chatTemplates/chatFormats.js";
import { CALL_REPLIES, THOUGHT_REPLIES, TOKEN_FAMILIES, TOOL_CALL_FAMILIES } from "../test/support/familyCases.js";
import { familyTemplate } from "../test/support/familyServer.js";

const { values: args } = parseArgs({ options: { json: { type: "string" } } });

const FILES = [
  "test/http/familyPrompts.test.ts",
  "test/engine/tokenCrossCheck.test.ts",
  "test/http/familyToolCalls.test.ts",
  "test/http/familyReplies.test.ts",
];

interface Assertion {
  ancestorTitles: string[];
  title: string;
  status: string;
}

const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-family-report-"));
const output = path.join(dir, "results.json");
try {
  // Failing tests are what the table shows: the run's exit status is not an error here.
  await promisify(execFile)("npx", ["vitest", "run", ...FILES, "--reporter=json", `--outputFile=${output}`], {
    maxBuffer: 1 << 26,
  }).catch(() => undefined);
  const results = JSON.parse(await readFile(output, "utf8")) as { testResults: Array<{ name: string; assertionResults: Assertion[] }> };
  const assertions = results.testResults.flatMap((file) =>
    file.assertionResults.map((each) => ({ file: path.basename(file.name), ...each })),
  );

  const stem = (template: string) => template.replace(/\.jinja$/, "");
  const familyOf = new Map<string, string>();
  for (const [family, template] of Object.entries(TOOL_CALL_FAMILIES)) familyOf.set(stem(template), family);
  for (const [family, { template }] of [...Object.entries(THOUGHT_REPLIES), ...Object.entries(CALL_REPLIES)]) {
    if (!familyOf.has(stem(template))) familyOf.set(stem(template), family);
  }
  for (const { name, template } of TOKEN_FAMILIES) if (!familyOf.has(template)) familyOf.set(template, name);

  const count = (filter: (assertion: (typeof assertions)[number]) => boolean): string => {
    const run = assertions.filter(filter);
    if (run.length === 0) return "—";
    return `${run.filter((each) => each.status === "passed").length}/${run.length}`;
  };
  const thinks = new Map<string, boolean>();
  for (const template of familyOf.keys())
    thinks.set(template, chatFormatOf(await familyTemplate(`${template}.jinja`)).thought !== undefined);
  const rows = [...familyOf.entries()].map(([template, family]) => {
    const thoughtCount = (filter: Parameters<typeof count>[0]) => (thinks.get(template) ? count(filter) : "n/a");
    const tokenFamily = TOKEN_FAMILIES.find((each) => each.template === template)?.name;
    const toolFamily = Object.entries(TOOL_CALL_FAMILIES).find(([, file]) => stem(file) === template)?.[0];
    const replyFamily = (cases: typeof CALL_REPLIES) => Object.entries(cases).find(([, each]) => stem(each.template) === template)?.[0];
    const autoFamily = replyFamily(CALL_REPLIES);
    const thoughtFamily = replyFamily(THOUGHT_REPLIES);
    return {
      family,
      template,
      prompt: count((each) => each.file === "familyPrompts.test.ts" && each.ancestorTitles[0] === template),
      tokenIds: count(
        (each) => each.file === "tokenCrossCheck.test.ts" && tokenFamily !== undefined && each.ancestorTitles.includes(tokenFamily),
      ),
      forcedCalls: count(
        (each) => each.file === "familyToolCalls.test.ts" && toolFamily !== undefined && each.ancestorTitles[0] === toolFamily,
      ),
      autoCall: count(
        (each) =>
          each.file === "familyReplies.test.ts" &&
          autoFamily !== undefined &&
          each.ancestorTitles[0] === `${autoFamily}'s call in auto mode`,
      ),
      thought: thoughtCount(
        (each) =>
          each.file === "familyReplies.test.ts" && thoughtFamily !== undefined && each.ancestorTitles[0] === `${thoughtFamily}'s thought`,
      ),
      thinkingOff: thoughtCount(
        (each) =>
          each.file === "familyReplies.test.ts" &&
          thoughtFamily !== undefined &&
          each.ancestorTitles[0] === `${thoughtFamily}'s thought turned off`,
      ),
    };
  });

  console.log("| family | template | prompt | token ids | forced calls | auto call | thought | thinking off |");
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) {
    console.log(
      `| ${row.family} | ${row.template} | ${row.prompt} | ${row.tokenIds} | ${row.forcedCalls} | ${row.autoCall} | ${row.thought} | ${row.thinkingOff} |`,
    );
  }
  const passed = assertions.filter((each) => each.status === "passed").length;
  console.log(`\n${assertions.length} tests, ${passed} passed.`);
  if (args.json) await writeFile(args.json, JSON.stringify({ rows, tests: assertions.length, passed }, null, 2));
} finally {
  await rm(dir, { recursive: true, force: true });
}
