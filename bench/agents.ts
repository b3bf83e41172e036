// Workload 3, agents that come back: conversations in parallel on fewer slots, each sending its
// whole growing conversation again every turn, all sharing one long system prompt with tool
// definitions. Time to first token per turn (p50, p90 over the conversations; it includes waiting
// for a slot, as a user waits) and the total wall time. llama-server runs with its defaults, so with
// its host-memory prompt cache (`--cache-ram`).
import { timeHttpStream } from "./httpStream.js";
import { names, type TargetKey } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import { percentile } from "./stats.js";
import { inTurn, withTargets, type ModelRun, type Target } from "./targets.js";

export interface AgentOptions {
  conversations: number;
  slots: number;
  turns: number;
  systemTokens: number;
  turnTokens: number;
  generated: number;
  /** Per-slot context: the last turn's whole conversation must fit. */
  contextSize: number;
}

const TOOLS = ["read_file", "write_file", "list_directory", "run_tests", "search_code", "git_diff", "http_get", "run_shell"].map(
  (name) => ({
    type: "function",
    function: {
      name,
      description: `Use ${name.replace("_", " ")} when the task needs it; report what it returned before going on.`,
      parameters: { type: "object", properties: { path: { type: "string" }, argument: { type: "string" } }, required: ["path"] },
    },
  }),
);

/** The shared system prompt: instructions, tool definitions as JSON, and reference text up to `tokens`. */
function systemPrompt(prompts: PromptText, tokens: number): string {
  const head = `You are a coding agent. Call a tool by answering with its name and JSON arguments.\nTools:\n${JSON.stringify(TOOLS, null, 1)}\nReference:\n`;
  return head + prompts.text(Math.max(1, tokens - prompts.count(head)), "Notes.");
}

interface Conversation {
  ttftMs: number[];
}

async function converse(
  target: Target,
  model: string,
  system: string,
  prompts: PromptText,
  options: AgentOptions,
  id: string,
): Promise<Conversation> {
  const messages = [{ role: "system", content: system }];
  const ttftMs: number[] = [];
  for (let turn = 1; turn <= options.turns; turn++) {
    messages.push({ role: "user", content: prompts.text(options.turnTokens, `Conversation ${id}, turn ${turn}:`) });
    const reply = await timeHttpStream(target.url, {
      model,
      messages,
      max_tokens: options.generated,
      temperature: 0,
      ignore_eos: true,
    });
    ttftMs.push(reply.ttftMs);
    messages.push({ role: "assistant", content: reply.text });
  }
  return { ttftMs };
}

export async function benchAgents(run: ModelRun, prompts: PromptText, options: AgentOptions): Promise<void> {
  const { figures } = run;
  const system = systemPrompt(prompts, options.systemTokens);
  await withTargets(run, "agent", { parallel: options.slots, contextSize: options.contextSize }, async (targets) => {
    // Warm-up without the system prompt, so neither server holds it before the measured turns.
    for (const target of targets)
      await timeHttpStream(target.url, {
        model: run.preset,
        messages: [{ role: "user", content: "Hello." }],
        max_tokens: 8,
        temperature: 0,
      });
    const results = await inTurn(targets, 0, async (target) => {
      const started = performance.now();
      const conversations = await Promise.all(
        Array.from({ length: options.conversations }, (_, i) =>
          converse(target, run.preset, system, prompts, options, `${target.key}-${i}`),
        ),
      );
      return { conversations, wallMs: performance.now() - started };
    });
    console.log(
      `\n### ${run.preset}: agents, ${options.conversations} conversations on ${options.slots} slots, ${options.turns} turns, ~${options.systemTokens}-token system prompt, ~${options.turnTokens} tokens a turn, ${options.generated} generated\n`,
    );
    console.log(`| turn | ${targets.map((t) => `${t.label} TTFT p50 / p90 ms`).join(" | ")} |`);
    console.log(`| ---: | ${targets.map(() => "---:").join(" | ")} |`);
    for (let turn = 1; turn <= options.turns; turn++) {
      const cells = targets.map((target) => {
        const ttfts = results.get(target.key)!.conversations.map((c) => c.ttftMs[turn - 1]!);
        const p50 = percentile(ttfts, 50);
        const p90 = percentile(ttfts, 90);
        figures.set(names.agentTurn(turn, "ttft_p50", target.key), p50);
        figures.set(names.agentTurn(turn, "ttft_p90", target.key), p90);
        return `${p50.toFixed(0)} / ${p90.toFixed(0)}`;
      });
      console.log(`| ${turn} | ${cells.join(" | ")} |`);
    }
    for (const [key, result] of results) overall(run, key, result.conversations, result.wallMs);
    for (const stat of ["ttft_p50", "ttft_p90", "wall"] as const)
      figures.ratio(names.agentRatio(stat), names.agentOverall(stat, "modelhost"), names.agentOverall(stat, "llama_server"));
    const cells = targets.map((t) => `${t.label} ${(figures.get(names.agentOverall("wall", t.key))! / 1000).toFixed(1)} s`);
    console.log(`\nwall: ${cells.join(", ")}`);
    const ratio = figures.get(names.agentRatio("ttft_p50"));
    if (ratio !== undefined) console.log(`modelhost ÷ llama-server, TTFT p50 of turns 2–${options.turns}: ${ratio.toFixed(3)}×`);
  });
}

/** TTFT p50 and p90 over the turns that come back (2 onwards: the first has nothing to restore), and the wall time. */
function overall(run: ModelRun, key: TargetKey, conversations: readonly Conversation[], wallMs: number): void {
  const later = conversations.flatMap((c) => c.ttftMs.slice(1));
  run.figures.set(names.agentOverall("ttft_p50", key), percentile(later, 50));
  run.figures.set(names.agentOverall("ttft_p90", key), percentile(later, 90));
  run.figures.set(names.agentOverall("wall", key), wallMs);
}
