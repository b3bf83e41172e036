// Issue 31's measurement of prompts: each of llama.cpp's real chat templates (models/templates, from
// the source node-llama-cpp ships) and ours (test/fixtures/templates) written into a tiny test model, served, and every conversation
// shape of test/fixtures/chatTemplates sent to POST /apply-template as an OpenAI chat body; the
// prompt modelhost renders is compared with the reference that Python's jinja2 rendered as
// transformers does (scripts/renderTemplateReferences.py). Prints one markdown row per template:
// how many cases are identical, and the first difference. A measurement, not a test: it shows where
// the rendering stands.
//
//   npx tsx scripts/compareFamilyPrompts.ts [--only SUBSTRING] [--json FILE]
//
// The test model's vocabulary is the project's own, so a template's bos_token and eos_token print
// that vocabulary's tokens where the reference prints the family's: such cases count as identical
// once those tokens' text is put back (column "identical, tokens aside").
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { makeTestModel } from "../src/testmodels/makeTestModel.js";
import { chatBody, readFixtures, readShapes, withFamilyTokens, type Fixture } from "../test/support/chatTemplateFixtures.js";
import { familyTemplate } from "../test/support/familyServer.js";
import { postJson, startTestServer } from "../test/support/startTestServer.js";

const { values: args } = parseArgs({ options: { only: { type: "string" }, json: { type: "string" } } });

const shapes = readShapes().shapes;

const fixtures = readFixtures().filter((fixture) => fixture.origin.kind !== "npm" && (!args.only || fixture.template.includes(args.only)));

const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-family-prompts-"));
const names = new Map<Fixture, string>();
const models: Record<string, string> = {};
for (const [index, fixture] of fixtures.entries()) {
  const name = `family-${index}`;
  const chatTemplate = await familyTemplate(path.basename(fixture.origin.path));
  models[name] = (await makeTestModel({ preset: "tiny", out: path.join(dir, `${name}.gguf`), chatTemplate })).path;
  names.set(fixture, name);
}
// The references were rendered at a fixed instant (strftime_now): the server, in this process, reads
// the same clock, so templates that print today's date print theirs.
const fixedNow = Date.parse(`${fixtures[0]?.now ?? "2025-07-15T09:30:00"}Z`);
globalThis.Date = class extends Date {
  constructor(...args: ConstructorParameters<typeof Date>) {
    if ((args as unknown[]).length === 0) super(fixedNow);
    else super(...args);
  }
} as DateConstructor;
const server = await startTestServer({ models, config: { maxLoadedModels: 1 } });

interface Row {
  template: string;
  cases: number;
  identical: number;
  tokensAside: number;
  firstDifference?: string;
}
const rows: Row[] = [];
try {
  for (const fixture of fixtures) {
    const row: Row = { template: fixture.template, cases: 0, identical: 0, tokensAside: 0 };
    for (const testCase of fixture.cases.filter((each) => each.arguments === "object")) {
      row.cases++;
      const response = await postJson(
        `${server.url}/apply-template`,
        chatBody(names.get(fixture)!, shapes[testCase.shape]!, testCase.kwargs),
      );
      const answer = (await response.json()) as { prompt?: string; error?: { message: string } };
      const expected = testCase.rendered;
      if (expected === undefined) {
        // The reference raised (or jinja2 failed): a 400 is the match.
        if (response.status === 400) {
          row.identical++;
          row.tokensAside++;
        } else
          row.firstDifference ??= `${testCase.name}: reference raised "${testCase.raised ?? testCase.error}", modelhost ${response.status}`;
        continue;
      }
      if (answer.prompt === undefined) {
        row.firstDifference ??= `${testCase.name}: ${response.status} ${answer.error?.message ?? ""}`.slice(0, 160);
        continue;
      }
      if (answer.prompt === expected) row.identical++;
      const ours = withFamilyTokens(answer.prompt, fixture, expected);
      if (ours === expected) row.tokensAside++;
      else row.firstDifference ??= `${testCase.name}: ${firstDifference(expected, ours)}`;
    }
    rows.push(row);
  }
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}

/** Where two prompts part: the reference's text and ours from there, shortly, as JSON strings. */
function firstDifference(expected: string, actual: string): string {
  let at = 0;
  while (at < expected.length && expected[at] === actual[at]) at++;
  const from = Math.max(0, at - 20);
  return `at ${at}: reference ${JSON.stringify(expected.slice(from, at + 40))}, modelhost ${JSON.stringify(actual.slice(from, at + 40))}`;
}

console.log("| template | cases | identical | identical, tokens aside | first difference |");
console.log("| --- | ---: | ---: | ---: | --- |");
for (const row of rows) {
  console.log(
    `| ${row.template} | ${row.cases} | ${row.identical} | ${row.tokensAside} | ${(row.firstDifference ?? "").replaceAll("|", "\\|")} |`,
  );
}
const total = rows.reduce(
  (sum, row) => ({
    cases: sum.cases + row.cases,
    identical: sum.identical + row.identical,
    tokensAside: sum.tokensAside + row.tokensAside,
  }),
  {
    cases: 0,
    identical: 0,
    tokensAside: 0,
  },
);
console.log(
  `\n${rows.length} templates, ${total.cases} cases: ${total.identical} identical, ${total.tokensAside} identical with the family's own bos/eos text.`,
);
if (args.json) await writeFile(args.json, JSON.stringify({ rows, total }, null, 2));
