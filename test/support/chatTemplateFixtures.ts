import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { ToolDefinition } from "../../src/core/ChatRequest.js";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";

/**
 * The reference renderings of real chat templates (test/fixtures/chatTemplates/, written by
 * scripts/renderTemplateReferences.py: Python's jinja2 rendering each template as transformers
 * does): the conversation shapes, and one fixture per template with each case's rendering.
 */
export const fixtureDir = path.resolve(import.meta.dirname, "../fixtures/chatTemplates");

/** A message as transformers takes it (tool-call arguments as JSON text; the script passes them as objects). */
export interface ShapeMessage {
  role: string;
  content: string;
  tool_calls?: Array<{ id: string; name: string; arguments: string }>;
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
}

export interface Shapes {
  tools: ToolDefinition[];
  shapes: Record<string, { messages: ShapeMessage[]; tools?: ToolDefinition[] }>;
}

export interface FixtureCase {
  name: string;
  shape: string;
  kwargs: { enable_thinking?: boolean; reasoning_effort?: "low" | "high"; thinking_budget?: number };
  arguments: "object" | "string";
  /** What jinja2 rendered; absent when the template raised (`raised`, its own message) or jinja2 failed (`error`). */
  rendered?: string;
  raised?: string;
  error?: string;
}

export interface Fixture {
  template: string;
  origin:
    | { kind: "llama.cpp"; path: string }
    // test/fixtures/templates: real templates llama.cpp ships none of.
    | { kind: "file"; path: string }
    | { kind: "npm"; package: string; path: string; name: string | null };
  sha256: string;
  bosToken: string | null;
  eosToken: string | null;
  now: string;
  cases: FixtureCase[];
}

export function readShapes(): Shapes {
  return JSON.parse(readFileSync(path.join(fixtureDir, "shapes.json"), "utf8")) as Shapes;
}

/** Every template's fixture, by file name order. */
export function readFixtures(): Fixture[] {
  return readdirSync(fixtureDir)
    .filter((file) => file.includes("--") && file.endsWith(".json"))
    .sort()
    .map((file) => JSON.parse(readFileSync(path.join(fixtureDir, file), "utf8")) as Fixture);
}

/** A shape as the OpenAI chat body a client sends. */
export function chatBody(model: string, shape: Shapes["shapes"][string], kwargs: FixtureCase["kwargs"]): object {
  const messages = shape.messages.map((message) => ({
    role: message.role,
    content: message.content,
    ...(message.tool_calls
      ? {
          tool_calls: message.tool_calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        }
      : {}),
    ...(message.tool_call_id !== undefined ? { tool_call_id: message.tool_call_id } : {}),
    ...(message.reasoning_content !== undefined ? { reasoning_content: message.reasoning_content } : {}),
  }));
  const effort = kwargs.enable_thinking === false || kwargs.thinking_budget === 0 ? "none" : kwargs.reasoning_effort;
  return {
    model,
    messages,
    ...(shape.tools ? { tools: shape.tools.map((tool) => ({ type: "function", function: tool })) } : {}),
    ...(effort ? { reasoning_effort: effort } : {}),
  };
}

const vocabulary = testVocabulary();
const ourBos = vocabulary.tokens[vocabulary.bosId]!;
const ourEos = vocabulary.tokens[vocabulary.eosId]!;

/**
 * A prompt the server rendered for a test model (the project's vocabulary) with the family's bos and
 * eos text put back, each where the template printed it: a literal that happens to be our
 * vocabulary's token (`<|im_end|>`) stays as it is. Returns the candidate equal to `expected` if any.
 */
export function withFamilyTokens(prompt: string, fixture: Fixture, expected: string): string {
  const withBos = prompt.replaceAll(ourBos, fixture.bosToken ?? ourBos);
  const withEos = (text: string) => text.replaceAll(ourEos, fixture.eosToken ?? ourEos);
  const candidates = [prompt, withBos, withEos(prompt), withEos(withBos)];
  return candidates.find((candidate) => candidate === expected) ?? withEos(withBos);
}

/**
 * Where src/chatTemplates/ (@huggingface/jinja 0.5.11 and the jinja2 semantics jinja2Interpreter.ts adds) renders otherwise than jinja2, case by case ("template/case"), each with its
 * cause. Each is asserted to still differ, so a library upgrade that fixes one fails here until it is removed.
 */
export const knownDifferences: Record<string, string> = {};
function known(template: string, reason: string, cases: string[]): void {
  for (const name of cases) knownDifferences[`${template}/${name}`] = reason;
}
const toolShapes = ["with_tools", "tool_result_json", "tool_result_text", "tool_result_compact_json", "parallel_calls"];
known(
  "llama-cpp-deepseek-r1",
  "jinja2 raises (its map() is a generator, which transformers' json.dumps cannot serialise); the library's map() gives a list and renders",
  toolShapes,
);
