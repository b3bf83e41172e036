// Controls the Chat and Side-by-side pages share: the model picker, the sampling settings, and an
// answer that renders as it streams.
import type { Model } from "./api";
import type { ChatBody, StreamResult } from "./chatStream";
import { field, formatNumber, h } from "./dom";
import { renderMarkdown } from "./markdown";

/** A `<select>` of the models the server lists (GET /playground/api/models = GET /v1/models). */
export function modelSelect(id: string, models: readonly Model[], preferred = 0): HTMLSelectElement {
  const select = h("select", { id, name: id, required: true });
  for (const model of models) select.append(h("option", { value: model.id }, model.id));
  if (models.length === 0) select.append(h("option", { value: "", disabled: true, selected: true }, "No models on this server"));
  else select.selectedIndex = Math.min(preferred, models.length - 1);
  return select;
}

export interface SamplingControls {
  element: HTMLElement;
  /** The settings that are filled in, as request fields. */
  values(): Pick<ChatBody, "temperature" | "max_tokens" | "top_p">;
}

/** Temperature, max tokens and top_p; a field left empty is left to the server's default. */
export function samplingControls(prefix: string, defaults = { temperature: "0.7", maxTokens: "512", topP: "1" }): SamplingControls {
  const temperature = h("input", {
    id: `${prefix}-temperature`,
    type: "number",
    min: 0,
    max: 2,
    step: 0.1,
    value: defaults.temperature,
    inputmode: "decimal",
  });
  const maxTokens = h("input", {
    id: `${prefix}-max-tokens`,
    type: "number",
    min: 1,
    step: 1,
    value: defaults.maxTokens,
    inputmode: "numeric",
  });
  const topP = h("input", {
    id: `${prefix}-top-p`,
    type: "number",
    min: 0,
    max: 1,
    step: 0.05,
    value: defaults.topP,
    inputmode: "decimal",
  });
  const element = h(
    "div",
    { class: "sampling" },
    field("Temperature", temperature, "0–2; lower is more predictable"),
    field("Max tokens", maxTokens, "Longest answer, in tokens"),
    field("Top p", topP, "0–1; nucleus sampling"),
  );
  const number = (input: HTMLInputElement) =>
    input.value.trim() === "" || Number.isNaN(input.valueAsNumber) ? undefined : input.valueAsNumber;
  return {
    element,
    values: () => {
      const values: Pick<ChatBody, "temperature" | "max_tokens" | "top_p"> = {};
      const t = number(temperature);
      const m = number(maxTokens);
      const p = number(topP);
      if (t !== undefined) values.temperature = t;
      if (m !== undefined) values.max_tokens = Math.round(m);
      if (p !== undefined) values.top_p = p;
      return values;
    },
  };
}

/**
 * An answer being streamed into `content` as sanitised Markdown. Rendering waits for the next
 * frame, so a burst of small deltas costs one render, not one per delta.
 */
export class StreamingAnswer {
  text = "";
  #scheduled = false;

  constructor(readonly content: HTMLElement) {
    content.replaceChildren();
    content.setAttribute("aria-busy", "true");
  }

  append(delta: string): void {
    this.text += delta;
    if (this.#scheduled) return;
    this.#scheduled = true;
    requestAnimationFrame(() => {
      this.#scheduled = false;
      renderMarkdown(this.content, this.text);
    });
  }

  finish(): void {
    renderMarkdown(this.content, this.text);
    this.content.removeAttribute("aria-busy");
  }
}

/** "TTFT 85 ms · 120.5 tokens/s · 64 tokens · stop" */
export function describeResult(result: StreamResult): string {
  const parts = [
    `TTFT ${result.ttftMs === null ? "—" : `${formatNumber(Math.round(result.ttftMs))} ms`}`,
    `${result.tokensPerSecond === null ? "—" : result.tokensPerSecond.toFixed(1)} tokens/s`,
    `${result.completionTokens === null ? "—" : formatNumber(result.completionTokens)} tokens`,
    result.finishReason === "aborted" ? "stopped" : `finish: ${result.finishReason}`,
  ];
  return parts.join(" · ");
}
