import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import OpenAI from "openai";
import { loadConfig } from "../../src/config/loadConfig.js";
import type { Config } from "../../src/config/settings.js";
import { serve } from "../../src/cli/serve.js";
import type { Engine } from "../../src/core/Engine.js";
import { serveEngine } from "./serveEngine.js";

export interface TestServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** The official client, pointed at the server as a user would (no retries, so statuses show). */
  client: OpenAI;
  modelsDir: string;
  /** The Fastify app behind it (for tests that enumerate its routes). */
  app: FastifyInstance;
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** Model id → GGUF file; each is linked into a fresh models directory as `<id>.gguf`. */
  models?: Record<string, string>;
  /**
   * An engine of the test's own (test/support/fakeEngine.ts) instead of llama.cpp running `models`:
   * for tests of what does not depend on a model (access, limits, error shapes, headers).
   */
  engine?: Engine;
  /** Written to the models directory as models.json. */
  manifest?: unknown;
  config?: Partial<Config>;
  /** Receives the server's JSON log lines (tests that inspect the logs). */
  logDestination?: { write(line: string): void };
  /** The built playground page's directory (default: the repository's web/dist). */
  playgroundDir?: string;
  /** The clock of token, session and stored-response expiry (tests of expiry move it instead of waiting). */
  now?: () => number;
}

/** Starts the real server (the CLI's composition root, or its composition around `engine`) on a free loopback port. */
export async function startTestServer(options: TestServerOptions): Promise<TestServer> {
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-models-"));
  // State (stored responses; hosted tests pass a data directory of their own) never goes to ~/.modelhost.
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-data-"));
  for (const [id, file] of Object.entries(options.models ?? {})) await symlink(file, path.join(modelsDir, `${id}.gguf`));
  if (options.manifest !== undefined) await writeFile(path.join(modelsDir, "models.json"), JSON.stringify(options.manifest));
  const config = loadConfig({
    overrides: {
      host: "127.0.0.1",
      port: 0,
      modelsDir,
      dataDir,
      logLevel: "silent",
      threads: 1,
      parallel: 4,
      contextSize: 1024,
      ...options.config,
    },
  });
  const serveOptions = { logDestination: options.logDestination, playgroundDir: options.playgroundDir, now: options.now };
  const server = options.engine ? await serveEngine(options.engine, config, serveOptions) : await serve(config, serveOptions);
  return {
    url: server.url,
    client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "any-value-works-locally", maxRetries: 0 }),
    modelsDir,
    app: server.app,
    async close() {
      await server.close();
      await rm(modelsDir, { recursive: true, force: true });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Reads a whole SSE response body and splits it into its `data:` payloads (comments such as `: keepalive` are skipped). */
export async function readSseEvents(response: Response): Promise<string[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((block) => block.length > 0 && !block.startsWith(":"))
    .map((block) => {
      if (!block.startsWith("data: ")) throw new Error(`not an SSE data event: ${JSON.stringify(block)}`);
      return block.slice("data: ".length);
    });
}

/**
 * A typed SSE body (Anthropic's Messages, OpenAI's Responses) as its named events, checking the
 * framing: `event: <type>` then `data: {…}` of that same type, then a blank line.
 */
export async function readNamedEvents<Data extends { type: string } = { type: string } & Record<string, unknown>>(
  response: Response,
): Promise<Array<{ event: string; data: Data }>> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((block) => block.length > 0)
    .map((block) => {
      const match = /^event: (\S+)\ndata: (.*)$/.exec(block);
      if (!match) throw new Error(`not a named SSE event: ${JSON.stringify(block)}`);
      const data = JSON.parse(match[2]!) as Data;
      if (data.type !== match[1]) throw new Error(`an \`event: ${match[1]}\` whose data has type ${JSON.stringify(data.type)}`);
      return { event: match[1]!, data };
    });
}

export async function postJson(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}
