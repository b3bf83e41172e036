// An app (client, store, retriever, tools) on a temporary database, pointed at a test service.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ClientOptions } from "openai";
import { createApp, type App } from "../../src/app.js";
import type { AnswerEvents } from "../../src/agent.js";
import type { Config } from "../../src/config.js";
import type { Match } from "../../src/retrieval.js";

export interface TestApp extends App {
  dir: string;
  /** Writes files (path → content; null deletes) under dir/docs. */
  writeDocs(files: Record<string, string | Uint8Array | null>): string;
}

export function createTestApp(baseURL: string, overrides: Partial<Config> = {}, clientOptions: Pick<ClientOptions, "fetch"> = {}): TestApp {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agent-test-"));
  const config: Config = {
    baseURL,
    apiKey: "test-key",
    chatModel: "chat",
    embeddingModel: "embed",
    threshold: 0.75,
    port: 0,
    database: path.join(dir, "agent.sqlite"),
    maxRounds: 5,
    maxTokens: undefined,
    chunkSize: 1000,
    ...overrides,
  };
  const app = createApp(config, { maxRetries: 0, ...clientOptions });
  const docs = path.join(dir, "docs");
  return {
    ...app,
    dir,
    writeDocs(files) {
      for (const [name, content] of Object.entries(files)) {
        const file = path.join(docs, name);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        if (content === null) fs.rmSync(file);
        else fs.writeFileSync(file, content);
      }
      return docs;
    },
    close() {
      app.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Collects an answer's pieces and sources. */
export function collector(): { pieces: string[]; sources: Match[][]; events: AnswerEvents } {
  const pieces: string[] = [];
  const sources: Match[][] = [];
  return { pieces, sources, events: { onText: (piece) => pieces.push(piece), onSources: (matches) => sources.push(matches) } };
}
