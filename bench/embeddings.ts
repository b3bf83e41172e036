// Workload 5, embeddings: passages of about `passageTokens` tokens sent in batches of `batch`, one
// batch at a time, through /v1/embeddings; passages/s against llama-server `--embeddings` on the
// same file, threads, context and slots. An embedding model keeps no KV cache between requests, so
// none is counted in its memory.
import { names } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import { inTurn, withTargets, type ModelRun } from "./targets.js";

export interface EmbeddingOptions {
  passages: number;
  passageTokens: number;
  batch: number;
  slots: number;
}

async function postEmbeddings(url: string, model: string, input: string[]): Promise<void> {
  const response = await fetch(`${url}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, input, encoding_format: "float" }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const reply = (await response.json()) as { data: unknown[] };
  if (reply.data.length !== input.length) throw new Error(`${input.length} inputs, ${reply.data.length} embeddings`);
}

export async function benchEmbeddings(run: ModelRun, prompts: PromptText, options: EmbeddingOptions): Promise<void> {
  const passages = Array.from({ length: options.passages }, (_, i) => prompts.text(options.passageTokens, `Passage ${i}.`));
  const batches = Array.from({ length: Math.ceil(passages.length / options.batch) }, (_, i) =>
    passages.slice(i * options.batch, (i + 1) * options.batch),
  );
  // Room for a passage and the special tokens around it.
  const contextSize = options.passageTokens + 64;
  await withTargets(
    run,
    "embeddings",
    { parallel: options.slots, contextSize, llamaServerArgs: ["--embeddings"], kvCache: false },
    async (targets) => {
      for (const target of targets) await postEmbeddings(target.url, run.preset, batches[0]!);
      const times = await inTurn(targets, 0, async (target) => {
        const started = performance.now();
        for (const batch of batches) await postEmbeddings(target.url, run.preset, batch);
        return performance.now() - started;
      });
      console.log(
        `\n### ${run.preset}: embeddings, ${options.passages} passages of ~${options.passageTokens} tokens in batches of ${options.batch}, ${options.slots} slots\n`,
      );
      console.log("| | passages/s |");
      console.log("| --- | ---: |");
      for (const target of targets) {
        const rate = (options.passages * 1000) / times.get(target.key)!;
        run.figures.set(names.embeddings(target.key), rate);
        console.log(`| ${target.label} | ${rate.toFixed(1)} |`);
      }
      run.figures.ratio(names.embeddingsRatio(), names.embeddings("modelhost"), names.embeddings("llama_server"));
      const ratio = run.figures.get(names.embeddingsRatio());
      if (ratio !== undefined) console.log(`\nmodelhost ÷ llama-server: ${ratio.toFixed(3)}×`);
    },
  );
}
