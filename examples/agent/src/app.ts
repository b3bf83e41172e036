// The composition root: one client, one store, the retriever and the tools, wired together.
import OpenAI, { type ClientOptions } from "openai";
import type { AgentDeps } from "./agent.js";
import type { Config } from "./config.js";
import { createRetriever } from "./retrieval.js";
import { SqliteVecStore } from "./store.js";
import { createTools } from "./tools.js";

export interface App extends AgentDeps {
  config: Config;
  store: SqliteVecStore;
  close(): void;
}

/**
 * @param clientOptions e.g. `{ maxRetries: 0 }` (the client retries 429 and 5xx twice by default),
 *   or a `fetch` of one's own (a test's, which records what the app sends)
 */
export function createApp(config: Config, clientOptions: Pick<ClientOptions, "maxRetries" | "fetch"> = {}): App {
  // The key goes to the client only; the client never prints it.
  const client = new OpenAI({ baseURL: config.baseURL, apiKey: config.apiKey, ...clientOptions });
  const store = new SqliteVecStore(config.database, config.embeddingModel);
  const retriever = createRetriever(client, store, config.embeddingModel, config.threshold);
  return { client, config, store, retriever, tools: createTools(retriever, () => store.folders()), close: () => store.close() };
}
