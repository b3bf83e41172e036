import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { chatBody, knownDifferences, readFixtures, readShapes, withFamilyTokens } from "../support/chatTemplateFixtures.js";
import { serveFamilies } from "../support/familyServer.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

/**
 * Every chat template llama.cpp ships, in a tiny model's file, served: each conversation shape sent
 * as a client sends it (an OpenAI chat body) to POST /apply-template, and the prompt the server
 * renders compared with transformers' rendering (test/fixtures/chatTemplates). The reference test
 * (test/unit/chatTemplateReferences.test.ts) checks the template library; this checks what the
 * server gives it and how it reads the result back from tokens: roles, tool calls and results,
 * past thoughts, thinking switches and effort, bos and eos, today's date.
 */
const shapes = readShapes().shapes;
// llama.cpp's templates and ours (test/fixtures/templates); the npm packages' are the reference test's.
const fixtures = readFixtures().filter((fixture) => fixture.origin.kind !== "npm");

let server: TestServer;

beforeAll(async () => {
  // The references were rendered at a fixed instant (strftime_now); templates print its date.
  vi.useFakeTimers({ toFake: ["Date"], now: new Date(`${fixtures[0]!.now}Z`) });
  const models = Object.fromEntries(
    fixtures.map((fixture, index) => [`family-${index}`, { template: path.basename(fixture.origin.path) }]),
  );
  server = await serveFamilies(models, { maxLoadedModels: 1 });
}, 300_000);

afterAll(async () => {
  vi.useRealTimers();
  await server?.close();
});

// Cases the library renders otherwise are the reference test's (asserted there to still differ);
// where jinja2 itself failed (not the template's raise_exception) there is nothing to compare.
const comparable = fixtures.map((fixture, index) => ({
  fixture,
  model: `family-${index}`,
  cases: fixture.cases.filter(
    (testCase) =>
      testCase.arguments === "object" && !knownDifferences[`${fixture.template}/${testCase.name}`] && testCase.error === undefined,
  ),
}));

it("compares every template but those where no case renders alike in both libraries or jinja2 fails on all", () => {
  // Command R+'s tool_use template fails in jinja2 on every shape (it iterates tools even when there are none,
  // and reads a description of each parameter).
  expect(comparable.filter((each) => each.cases.length === 0).map((each) => each.fixture.template)).toEqual([
    "CohereForAI-c4ai-command-r-plus-tool_use",
  ]);
});

describe.each(comparable.filter((each) => each.cases.length > 0).map((each) => [each.fixture.template, each] as const))(
  "%s",
  (_name, { fixture, model, cases }) => {
    it.each(cases.map((testCase) => [testCase.name, testCase] as const))("%s", async (_case, testCase) => {
      const response = await postJson(`${server.url}/apply-template`, chatBody(model, shapes[testCase.shape]!, testCase.kwargs));
      const answer = (await response.json()) as { prompt?: string; error?: { message: string } };
      if (testCase.rendered === undefined) {
        // The template's own raise_exception: a 400 with its message.
        expect(response.status).toBe(400);
        expect(answer.error?.message).toBe(testCase.raised);
        return;
      }
      expect(response.status, answer.error?.message).toBe(200);
      expect(withFamilyTokens(answer.prompt!, fixture, testCase.rendered)).toBe(testCase.rendered);
    });
  },
);
