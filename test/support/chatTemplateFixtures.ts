import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { ToolDefinition } from "../../src/core/ChatRequest.js";

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
  kwargs: { enable_thinking?: boolean; reasoning_effort?: "low" | "high" };
  arguments: "object" | "string";
  /** What jinja2 rendered; absent when the template raised (`raised`, its own message) or jinja2 failed (`error`). */
  rendered?: string;
  raised?: string;
  error?: string;
}

export interface Fixture {
  template: string;
  origin: { kind: "llama.cpp"; path: string } | { kind: "npm"; package: string; path: string; name: string | null };
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
