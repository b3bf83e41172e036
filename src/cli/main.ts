import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { loadConfig, settingsFor } from "../config/loadConfig.js";
import { formatSettingsHelp } from "../config/formatSettingsHelp.js";
import { settings, type CommandName } from "../config/settings.js";
import { CodedError } from "../core/CodedError.js";
import { ServerResponseError } from "./serverClient.js";
import { UsageError } from "./UsageError.js";

// Commands import their modules lazily: node-llama-cpp takes most of a second to load, and
// `--help` or a mistyped flag should answer at once.

const jsonOption: [string, string] = ["--json", "Print JSON for scripts instead of a table."];

/** Each command's summary and usage; `options` lists its own options, beside the settings' flags. */
const commands: Record<string, { summary: string; usage: string; options?: [string, string][] }> = {
  serve: {
    summary: "Start the API server (OpenAI-compatible under /v1, Ollama's native API under /api).",
    usage: "modelhost serve [options]",
  },
  pull: {
    summary: "Download a model from Hugging Face (hf.co/OWNER/REPO:QUANT, OWNER/REPO:QUANT, hf.co/OWNER/REPO/FILE.gguf) or a URL.",
    usage: "modelhost pull REF [--alias NAME]… [--adapter-of MODEL] [options]",
    options: [
      ["--alias <name>", "Another name for the model, beside REF as typed (repeatable)."],
      ["--adapter-of <model>", "The file is a LoRA adapter of MODEL: declare it over MODEL in models.json, served as MODEL+ADAPTER."],
    ],
  },
  run: {
    summary: "Chat with a model in the terminal, or answer one PROMPT (pulls the model if missing; starts a server if none runs).",
    usage: "modelhost run MODEL [PROMPT] [options of serve]",
  },
  list: { summary: "List the installed models (also `models`).", usage: "modelhost list [--json] [options]", options: [jsonOption] },
  show: { summary: "Show one installed model's details.", usage: "modelhost show MODEL [--json] [options]", options: [jsonOption] },
  rm: { summary: "Remove a model (its files), or one of its aliases.", usage: "modelhost rm MODEL [options]" },
  ps: { summary: "List the models the running server has loaded.", usage: "modelhost ps [--json] [options]", options: [jsonOption] },
  engine: {
    summary: "Build llama.cpp natively for this CPU (`engine build`), or show which binary loads (`engine status`).",
    usage: "modelhost engine <build|status> [options]",
  },
  account: { summary: "Hosted profile: create, list, disable accounts.", usage: "modelhost account <create|list|disable|enable|tier> …" },
  token: { summary: "Hosted profile: create, list, revoke personal access tokens.", usage: "modelhost token <create|list|revoke> …" },
  usage: { summary: "Hosted profile: print the usage ledger.", usage: "modelhost usage [--account A] [--since YYYY-MM-DD] [--json]" },
  "make-test-model": {
    summary: "Write a small GGUF model with random weights, for tests and benchmarks.",
    usage: "modelhost make-test-model --preset <tiny|bench|embed-tiny|think-tiny|rerank-tiny> --out <file.gguf> [--seed <n>]",
  },
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

function mainHelp(): string {
  const width = Math.max(...Object.keys(commands).map((name) => name.length));
  return [
    "modelhost: serve GGUF models behind the OpenAI-compatible chat-completions API",
    "",
    "Usage: modelhost <command> [options]",
    "",
    "Commands:",
    ...Object.entries(commands).map(([name, { summary }]) => `  ${name.padEnd(width)}  ${summary}`),
    "",
    "Options of `serve` (every option can also be set by its environment variable):",
    formatSettingsHelp("serve"),
    "",
    "  --help       Show help (also `modelhost <command> --help`).",
    "  --version    Print the version.",
  ].join("\n");
}

/** The settings each model command accepts (`run` may start a server, so it takes serve's). */
const modelCommandSettings = {
  pull: "pull",
  run: "serve",
  list: "models",
  models: "models",
  show: "models",
  rm: "models",
  ps: "client",
} as const;

function commandHelp(name: string, settingsOf: CommandName = name as CommandName): string {
  const command = commands[name];
  const own = (command?.options ?? []).map(([flag, description]) => `  ${flag}\n      ${description}`);
  return [command?.summary ?? "", "", `Usage: ${command?.usage ?? name}`, "", "Options:", ...own, formatSettingsHelp(settingsOf)].join(
    "\n",
  );
}

/** Parses the flags a command accepts, from its settings; unknown flags are an error. */
function parseFlags(command: CommandName, args: string[]): { flags: Record<string, string>; help: boolean } {
  const options: Record<string, { type: "string" | "boolean" }> = { help: { type: "boolean" } };
  for (const key of settingsFor(command)) options[settings[key].flag] = { type: "string" };
  const { values } = parseArgs({ args, options, allowPositionals: false, strict: true });
  const { help, ...flags } = values as Record<string, string | boolean | undefined>;
  return { flags: flags as Record<string, string>, help: help === true };
}

/** Separates the settings' flags (e.g. --data-dir) from a command's own arguments. */
function splitSettingsFlags(command: CommandName, args: string[]): { flags: Record<string, string>; others: string[] } {
  const known = new Set(settingsFor(command).map((key) => settings[key].flag));
  const flags: Record<string, string> = {};
  const others: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [name, inline] = arg.startsWith("--") ? arg.slice(2).split(/=(.*)/s, 2) : [];
    if (name !== undefined && known.has(name)) {
      const value = inline ?? args[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value.`);
      flags[name] = value;
    } else {
      others.push(arg);
    }
  }
  return { flags, others };
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    console.log(mainHelp());
    return 0;
  }
  if (command === "--version" || command === "-v") {
    console.log(version());
    return 0;
  }
  switch (command) {
    case "serve": {
      const { flags, help } = parseFlags("serve", rest);
      if (help) return print(commandHelp("serve"));
      const config = loadConfig({ flags, env: process.env });
      if (config.pull.length > 0) {
        const { pullCommand } = await import("./modelCommands.js");
        for (const reference of config.pull) console.log(await pullCommand([reference], config));
      }
      const { serve } = await import("./serve.js");
      const server = await serve(config);
      // Said whatever the log level, for people and for scripts that wait for the server.
      process.stderr.write(`modelhost: listening on ${server.url} (${config.profile} profile)\n`);
      if (server.models.length === 0) process.stderr.write(`modelhost: ${noModelsHint(config.modelsDir)}\n`);
      // The first SIGTERM or SIGINT drains (see --shutdown-grace) and exits 0; a second one ends the
      // process at once by that very signal, so its parent sees it (a shell reports 128 + its
      // number: 130, 143). Not process.exit(): that runs llama.cpp's destructors while its threads
      // may still be decoding, which crashed (SIGSEGV) 8 times in 12 with a stream in flight.
      let stopping = false;
      const stop = (signal: NodeJS.Signals) => {
        if (stopping) {
          process.stderr.write(`modelhost: ${signal} again, exiting now\n`);
          // Without a listener, Node restores the signal's default action: termination.
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          process.kill(process.pid, signal);
          return;
        }
        stopping = true;
        process.stderr.write(`modelhost: ${signal}, finishing the requests in flight (at most ${config.shutdownGrace / 1000} s)\n`);
        void server.shutdown().then(
          (report) => {
            process.stderr.write(`modelhost: stopped (${report.inFlight} in flight, ${report.cut} cut, drained in ${report.ms} ms)\n`);
            process.exit(0);
          },
          (error: unknown) => {
            process.stderr.write(`modelhost: shutdown failed: ${error instanceof Error ? error.message : String(error)}\n`);
            process.exit(1);
          },
        );
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
      // SIGHUP reads --upstreams again (and no longer ends the process, its default).
      process.on("SIGHUP", () => void server.reload().then((said) => process.stderr.write(`modelhost: SIGHUP, ${said}\n`)));
      return -1; // keep running
    }
    case "pull":
    case "run":
    case "list":
    case "models":
    case "show":
    case "rm":
    case "ps": {
      const settingsOf = modelCommandSettings[command];
      if (rest.includes("--help")) return print(commandHelp(command === "models" ? "list" : command, settingsOf));
      const { flags, others } = splitSettingsFlags(settingsOf, rest);
      const config = loadConfig({ flags, env: process.env });
      if (command === "run") {
        const { runCommand } = await import("./runCommand.js");
        return runCommand(others, config);
      }
      const modelCommands = await import("./modelCommands.js");
      const run = {
        pull: modelCommands.pullCommand,
        list: modelCommands.listCommand,
        models: modelCommands.listCommand,
        show: modelCommands.showCommand,
        rm: modelCommands.rmCommand,
        ps: modelCommands.psCommand,
      }[command];
      return print(await run(others, config));
    }
    case "engine": {
      const [action, ...flagArgs] = rest;
      const { flags, help } = parseFlags("engine", action === "--help" ? ["--help"] : flagArgs);
      if (help) return print(commandHelp("engine"));
      const { engineCommand } = await import("./engineCommand.js");
      return print(await engineCommand(action, loadConfig({ flags, env: process.env })));
    }
    case "account":
    case "token":
    case "usage": {
      const { accessCommand, accessUsage } = await import("./accessCommands.js");
      if (rest.includes("--help")) return print(`${accessUsage}\n\nOptions:\n${formatSettingsHelp("access")}`);
      const { flags, others } = splitSettingsFlags("access", rest);
      return print(await accessCommand(command, others, loadConfig({ flags, env: process.env })));
    }
    case "make-test-model": {
      const { makeTestModelCommand } = await import("./makeTestModelCommand.js");
      return print(await makeTestModelCommand(rest));
    }
    default:
      console.error(`modelhost: unknown command "${command}". Run \`modelhost --help\` for the list.`);
      return 2;
  }
}

function print(text: string): number {
  console.log(text);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    // A user's mistake, or a failure they can act on (a server's error answer): the message alone.
    // Anything else is a bug: the stack too.
    if (
      error instanceof CodedError ||
      error instanceof ServerResponseError ||
      (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")
    ) {
      console.error(`modelhost: ${(error as Error).message}`);
      process.exitCode = 2;
    } else {
      console.error(error);
      process.exitCode = 1;
    }
  },
);

/** What a newcomer who started the server with nothing to serve does next: one line. */
function noModelsHint(modelsDir: string): string {
  return `no models in ${modelsDir} yet. Add one: \`npx modelhost pull hf.co/OWNER/REPO:QUANT\`, or copy a .gguf file there, or make a tiny test model: \`npm run make-test-model -- --preset tiny --out ${modelsDir}/tiny.gguf\``;
}
