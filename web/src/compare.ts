// Side by side: one prompt to two models at once, both streaming, with the time to first token
// and the decoding speed under each answer.
import type { Model } from "./api";
import { type ChatBody, type ChatMessage, streamChat } from "./chatStream";
import { describeResult, modelSelect, samplingControls, StreamingAnswer } from "./controls";
import { errorLine, field, h, showError, statusLine } from "./dom";

const SIDES = ["a", "b"] as const;

export function comparePage(models: readonly Model[]): HTMLElement {
  let running: AbortController | null = null;
  const pickers = SIDES.map((side, index) => modelSelect(`compare-model-${side}`, models, index));
  const system = h("textarea", { id: "compare-system", rows: 2, placeholder: "Optional" });
  const prompt = h("textarea", { id: "compare-input", rows: 3, required: true, placeholder: "The same message goes to both models" });
  const sampling = samplingControls("compare");
  const send = h("button", { type: "submit", id: "compare-send" }, "Send to both");
  const stop = h("button", { type: "button", id: "compare-stop", class: "danger", disabled: true }, "Stop");
  const status = statusLine();
  status.id = "compare-status";
  const panes = SIDES.map((side) => {
    const title = h("h3", {}, "—");
    const content = h("div", { class: "content markdown" });
    const stats = h("p", { class: "meta stats" });
    const error = errorLine();
    return {
      side,
      title,
      content,
      stats,
      error,
      element: h("article", { class: "pane", id: `compare-pane-${side}` }, title, content, error, stats),
    };
  });

  async function run(side: number, messages: ChatMessage[], signal: AbortSignal): Promise<void> {
    const pane = panes[side];
    const picker = pickers[side];
    if (!pane || !picker) return;
    const body: ChatBody = { model: picker.value, messages, ...sampling.values() };
    pane.title.textContent = body.model;
    pane.stats.textContent = "waiting…";
    showError(pane.error, null);
    const answer = new StreamingAnswer(pane.content);
    try {
      const result = await streamChat(body, signal, (delta) => answer.append(delta));
      pane.stats.textContent = describeResult(result);
    } catch (failure) {
      pane.stats.textContent = "";
      showError(pane.error, failure);
    } finally {
      answer.finish();
    }
  }

  const form = h(
    "form",
    { class: "compare-form", id: "compare-form" },
    h("div", { class: "row" }, field("Model A", pickers[0] as HTMLSelectElement), field("Model B", pickers[1] as HTMLSelectElement)),
    field("System prompt", system),
    field("Message", prompt),
    sampling.element,
    h("div", { class: "buttons" }, send, stop),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running || !prompt.value.trim()) return;
    const messages: ChatMessage[] = [];
    if (system.value.trim()) messages.push({ role: "system", content: system.value });
    messages.push({ role: "user", content: prompt.value });
    const controller = new AbortController();
    running = controller;
    send.disabled = true;
    stop.disabled = false;
    status.textContent = "Both models are answering…";
    await Promise.all(panes.map((_, side) => run(side, messages, controller.signal)));
    status.textContent = controller.signal.aborted ? "Stopped." : "Both answers complete.";
    running = null;
    send.disabled = false;
    stop.disabled = true;
  });
  stop.addEventListener("click", () => running?.abort());

  return h(
    "section",
    { class: "page compare-page", "aria-labelledby": "compare-title" },
    h("h2", { id: "compare-title" }, "Side by side"),
    form,
    status,
    h("div", { class: "panes" }, ...panes.map((pane) => pane.element)),
  );
}
