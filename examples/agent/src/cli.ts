// npm run agent -- ingest DIR | ask "question" [--debug] | serve
import path from "node:path";
import { parseArgs } from "node:util";
import { answer } from "./agent.js";
import { createApp, type App } from "./app.js";
import { describeConfig, loadConfig } from "./config.js";
import { ingest } from "./ingest.js";
import type { Match } from "./retrieval.js";
import { createRelay } from "./server.js";

const USAGE = `usage: npm run agent -- <command>
  ingest DIR            read the text and Markdown files under DIR into the store (its images: view_image)
  ask "question"        answer from the documents, streamed, with its sources (--debug: every candidate)
  serve                 the page and /stream on AGENT_PORT`;

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { debug: { type: "boolean" }, help: { type: "boolean" } },
  });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    console.log(USAGE);
    return;
  }
  if (!["ingest", "ask", "serve"].includes(command)) throw new Error(`unknown command "${command}"\n${USAGE}`);
  const app = createApp(loadConfig());
  if (command === "serve") return serveCommand(app);
  try {
    if (command === "ingest") await ingestCommand(rest[0], app);
    else await askCommand(rest.join(" "), app, Boolean(values.debug));
  } finally {
    app.close();
  }
}

async function ingestCommand(directory: string | undefined, { client, store, config }: App): Promise<void> {
  if (!directory) throw new Error(`ingest needs a directory\n${USAGE}`);
  // npm runs scripts in the package's folder; INIT_CWD is where the user typed `npm run`.
  const root = path.resolve(process.env.INIT_CWD ?? process.cwd(), directory);
  const bar = process.stderr.isTTY ? progressBar : undefined;
  // A fifth of each chunk is repeated in the next, so a fact cut by a border is whole in one of them.
  const chunking = { maxChars: config.chunkSize, overlapChars: Math.floor(config.chunkSize / 5) };
  const report = await ingest(root, { client, store, embeddingModel: config.embeddingModel, chunking, onProgress: bar });
  if (bar) process.stderr.write("\n");
  console.log(
    `${root}: ${report.added.length} added, ${report.changed.length} changed, ${report.unchanged.length} unchanged, ${report.removed.length} removed; ` +
      `${report.chunks} chunks embedded in ${report.requests} requests; ${store.chunkCount()} chunks stored; ${report.images.length} images viewable`,
  );
}

function progressBar(done: number, total: number): void {
  const width = 30;
  const filled = Math.round((done / total) * width);
  process.stderr.write(`\r[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${total} chunks embedded`);
}

async function askCommand(question: string, app: App, debug: boolean): Promise<void> {
  if (!question) throw new Error(`ask needs a question\n${USAGE}`);
  const sources: Match[] = [];
  await answer(question, app, {
    onSources: (matches) => {
      sources.push(...matches.filter((match) => match.used));
      if (debug) for (const match of matches) console.error(`[debug] ${formatMatch(match)}${match.used ? "" : " (below threshold)"}`);
    },
    onText: (piece) => process.stdout.write(piece),
  });
  process.stdout.write("\n");
  if (sources.length > 0) console.log(`\nSources:\n${sources.map((match, i) => `[${i + 1}] ${formatMatch(match)}`).join("\n")}`);
}

function formatMatch(match: Match): string {
  return `${match.source} #${match.position}  ${match.similarity.toFixed(3)} ${match.band}`;
}

async function serveCommand(app: App): Promise<void> {
  const { config } = app;
  const server = createRelay(app);
  await new Promise<void>((resolve) => server.listen(config.port, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  console.log(`agent on http://127.0.0.1:${port}/ (${describeConfig(config)})`);
  const stop = () => server.close(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
