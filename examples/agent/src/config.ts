// Settings from the environment, or from an untracked `.env` beside package.json (copy
// `.env.example`). A variable set in the environment wins over the file. The API key is kept out
// of everything this app prints: `describeConfig` shows only whether it is set.
import fs from "node:fs";
import path from "node:path";
import { parseEnv } from "node:util";
import { DEFAULT_CHUNKING } from "./chunking.js";

export interface Config {
  /** Any OpenAI-compatible service: modelhost locally, its hosted profile, or another. */
  baseURL: string;
  apiKey: string;
  chatModel: string;
  embeddingModel: string;
  /** Chunks whose cosine similarity to the question is above this are used. */
  threshold: number;
  port: number;
  /** The SQLite file of chunks and vectors. */
  database: string;
  /** Tool rounds before the loop gives up. */
  maxRounds: number;
  /** Optional cap on each reply's length (useful with small test models). */
  maxTokens: number | undefined;
  /** Largest chunk in characters; must fit the embedding model's context. */
  chunkSize: number;
}

export const APP_DIR = path.resolve(import.meta.dirname, "..");

/** Reads `.env` (when present) under the environment; the environment wins. */
export function readEnvironment(
  envFile = path.join(APP_DIR, ".env"),
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string | undefined> {
  const fromFile = fs.existsSync(envFile) ? parseEnv(fs.readFileSync(envFile, "utf8")) : {};
  return { ...fromFile, ...env };
}

export function loadConfig(env: Record<string, string | undefined> = readEnvironment()): Config {
  const apiKey = env.OPENAI_API_KEY;
  if (!apiKey) {
    throw new Error(
      "OPENAI_API_KEY is not set. Put it in examples/agent/.env (see .env.example); any placeholder works against a local modelhost.",
    );
  }
  return {
    baseURL: env.OPENAI_BASE_URL || "http://127.0.0.1:11434/v1",
    apiKey,
    chatModel: required(env, "AGENT_CHAT_MODEL"),
    embeddingModel: required(env, "AGENT_EMBEDDING_MODEL"),
    threshold: number(env, "AGENT_THRESHOLD", 0.75, (value) => value >= -1 && value <= 1),
    port: number(env, "AGENT_PORT", 3000, (value) => Number.isInteger(value) && value >= 0 && value < 65536),
    database: path.resolve(APP_DIR, env.AGENT_DATABASE || "data/agent.sqlite"),
    maxRounds: number(env, "AGENT_MAX_ROUNDS", 5, (value) => Number.isInteger(value) && value >= 1),
    maxTokens: env.AGENT_MAX_TOKENS ? number(env, "AGENT_MAX_TOKENS", 0, (value) => Number.isInteger(value) && value > 0) : undefined,
    chunkSize: number(env, "AGENT_CHUNK_SIZE", DEFAULT_CHUNKING.maxChars, (value) => Number.isInteger(value) && value >= 100),
  };
}

/** The settings as one line, for logs: the key shows only as set. */
export function describeConfig(config: Config): string {
  return `service ${config.baseURL} (key set), chat ${config.chatModel}, embeddings ${config.embeddingModel}, threshold ${config.threshold}`;
}

function required(env: Record<string, string | undefined>, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set (see examples/agent/.env.example).`);
  return value;
}

function number(env: Record<string, string | undefined>, name: string, fallback: number, valid: (value: number) => boolean): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || !valid(value)) throw new Error(`${name}=${JSON.stringify(raw)} is not valid.`);
  return value;
}
