import { text } from "node:stream/consumers";
import { createInterface, type Interface } from "node:readline";
import { parseArgs } from "node:util";
import type { Config } from "../config/settings.js";
import type { PullProgress } from "../core/ModelStore.js";
import { progressPrinter } from "./pullProgress.js";
import type { RunningServer } from "./serve.js";
import { ServerClient, ServerResponseError, serverUrl } from "./serverClient.js";
import { UsageError } from "./UsageError.js";

const usage = "modelhost run MODEL [PROMPT] [serve options]";

const help = `Commands:
  /bye       leave (or Ctrl-D)
  /clear     forget the conversation so far
  /?         this help
Ctrl-C stops a reply. Begin a message with """ to write several lines; end it with """.`;

interface Message {
  role: "user" | "assistant";
  content: string;
}

/**
 * `modelhost run MODEL [PROMPT]`: talks to the server at --host/--port, or starts one in this
 * process when none answers; pulls the model if it is missing; then answers PROMPT (or what stdin
 * brings) and exits, or chats in the terminal, keeping the conversation.
 */
export async function runCommand(args: string[], config: Config): Promise<number> {
  const { positionals } = parseArgs({ args, options: {}, allowPositionals: true, strict: true });
  const [model, ...words] = positionals;
  // Piped into `head` and the like: a closed stdout ends the command quietly.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    throw error;
  });
  if (!model) throw new UsageError(`Give a MODEL.\n\nUsage: ${usage}`);
  let prompt: string | undefined = words.length > 0 ? words.join(" ") : undefined;
  if (prompt === undefined && !process.stdin.isTTY) prompt = (await text(process.stdin)).trim();

  let client = new ServerClient(serverUrl(config));
  let server: RunningServer | undefined;
  if (!(await client.isRunning())) {
    const { serve } = await import("./serve.js");
    // This command's own server: local profile, loopback, a free port, and quiet, since this
    // terminal is for the conversation.
    server = await serve({
      ...config,
      profile: "local",
      host: "127.0.0.1",
      port: 0,
      logLevel: config.logLevel === "info" ? "error" : config.logLevel,
    });
    client = new ServerClient(server.url);
  }
  try {
    await pullIfMissing(client, model);
    if (prompt !== undefined) return await answerOnce(client, model, prompt);
    return await chat(client, model);
  } finally {
    await server?.close();
  }
}

async function pullIfMissing(client: ServerClient, model: string): Promise<void> {
  try {
    await client.get(`/v1/models/${encodeURIComponent(model)}`);
    return;
  } catch (error) {
    if (!(error instanceof ServerResponseError && error.status === 404)) throw error;
  }
  const progress = progressPrinter(process.stderr);
  try {
    for await (const event of client.stream("/api/pull", { model, stream: true })) progress.update(event as unknown as PullProgress);
  } catch (error) {
    // Most often a name typed wrong: say first that no such model is installed.
    if (error instanceof ServerResponseError && error.status === 400)
      throw new UsageError(`No model "${model}" is installed. ${error.message}`);
    throw error;
  } finally {
    progress.finish();
  }
}

async function answerOnce(client: ServerClient, model: string, prompt: string): Promise<number> {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  try {
    await streamReply(client, model, [{ role: "user", content: prompt }], controller.signal);
    return controller.signal.aborted ? 130 : 0;
  } finally {
    process.removeListener("SIGINT", stop);
  }
}

/**
 * Control characters other than newline and tab, which a model may emit (a random-weights model
 * does): written raw, an escape sequence could reconfigure the user's terminal.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const controlCharacters = /[\x00-\x08\x0b-\x1f\x7f\x9b]/g;

/** Streams one reply to stdout; returns its text (what arrived, if stopped). */
async function streamReply(client: ServerClient, model: string, messages: Message[], signal: AbortSignal): Promise<string> {
  let reply = "";
  let thinking = false;
  try {
    for await (const event of client.stream("/api/chat", { model, messages, stream: true }, signal)) {
      const message = event.message as { content?: string; thinking?: string } | undefined;
      if (message?.thinking) {
        if (!thinking) process.stdout.write("\x1b[2mThinking...\n");
        thinking = true;
        process.stdout.write(message.thinking.replace(controlCharacters, ""));
      }
      if (message?.content) {
        if (thinking) process.stdout.write("\n...done thinking.\x1b[0m\n\n");
        thinking = false;
        reply += message.content;
        process.stdout.write(message.content.replace(controlCharacters, ""));
      }
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  } finally {
    if (thinking) process.stdout.write("\x1b[0m");
    process.stdout.write("\n");
  }
  return reply;
}

/** The interactive conversation: one message per line, or a `"""` block of several. */
async function chat(client: ServerClient, model: string): Promise<number> {
  const rl = createInterface({ input: process.stdin, output: process.stdout, prompt: ">>> " });
  const history: Message[] = [];
  let generating: AbortController | undefined;
  let block: string[] | undefined;

  const prompt = (text = ">>> ") => {
    rl.setPrompt(text);
    rl.prompt();
  };
  rl.on("SIGINT", () => {
    if (generating) return generating.abort();
    if (rl.line.length > 0 || block) {
      block = undefined;
      clearLine(rl);
      process.stdout.write("\n");
    } else {
      process.stdout.write("\nUse Ctrl + d or /bye to exit.\n");
    }
    prompt();
  });

  process.stdout.write(`Chatting with ${model}. Type /? for help.\n`);
  prompt();
  for await (const line of rl) {
    let message: string;
    if (block) {
      const end = line.lastIndexOf('"""');
      if (end < 0) {
        block.push(line);
        prompt("... ");
        continue;
      }
      block.push(line.slice(0, end));
      message = block.join("\n");
      block = undefined;
    } else if (line.trimStart().startsWith('"""')) {
      const rest = line.trimStart().slice(3);
      const end = rest.lastIndexOf('"""');
      if (end < 0) {
        block = [rest];
        prompt("... ");
        continue;
      }
      message = rest.slice(0, end);
    } else {
      message = line;
    }

    const command = message.trim();
    if (command === "/bye") break;
    if (command === "") {
      prompt();
      continue;
    }
    if (command === "/clear") {
      history.length = 0;
      process.stdout.write("Cleared the conversation.\n");
      prompt();
      continue;
    }
    if (command === "/?" || command === "/help") {
      process.stdout.write(`${help}\n`);
      prompt();
      continue;
    }
    if (/^\/\w+$/.test(command)) {
      process.stdout.write(`Unknown command ${command}. Type /? for help.\n`);
      prompt();
      continue;
    }

    history.push({ role: "user", content: message });
    generating = new AbortController();
    try {
      for (;;) {
        try {
          const reply = await streamReply(client, model, history, generating.signal);
          // A reply stopped with Ctrl-C stays in the conversation as far as it got, as it was shown.
          history.push({ role: "assistant", content: reply });
          break;
        } catch (error) {
          // The conversation outgrew the model's context: forget its oldest exchange and try again.
          if (!(isContextOverflow(error) && history.length > 1)) throw error;
          history.splice(0, 2);
          process.stdout.write("\x1b[2m(The oldest messages no longer fit the model's context; they were forgotten.)\x1b[0m\n");
        }
      }
    } catch (error) {
      history.pop();
      process.stdout.write(`Error: ${(error as Error).message}\n`);
    } finally {
      generating = undefined;
    }
    prompt();
  }
  rl.close();
  return 0;
}

function isContextOverflow(error: unknown): boolean {
  return error instanceof ServerResponseError && error.status === 400 && /context length/i.test(error.message);
}

function clearLine(rl: Interface): void {
  // Ctrl-U: readline deletes from the cursor to the line start.
  rl.write(null, { ctrl: true, name: "u" });
  rl.write(null, { ctrl: true, name: "k" });
}
