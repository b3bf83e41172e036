// The Chat page: a conversation with one model, streamed, with its settings, images for models
// that read them, Stop, Reset, edit and resend of the last message, and "Copy as code".
import type { Model } from "./api";
import { type Attachment, imagePicker, thumbnails, userContent } from "./attachments";
import { type ChatBody, type ChatMessage, type ResponseFormat, streamChat } from "./chatStream";
import { codeFor, type Language, LANGUAGES } from "./codeSnippets";
import { describeResult, modelSelect, samplingControls, StreamingAnswer } from "./controls";
import { copyButton, errorLine, errorMessage, field, h, showError, statusLine } from "./dom";
import { renderMarkdown } from "./markdown";

interface Turn {
  role: "user" | "assistant";
  /** The text: the user's as typed, the answer as the model wrote it. */
  content: string;
  /** For the user's messages: the images sent with the text. */
  images?: readonly Attachment[];
  /** For answers: the model and the figures under it. */
  meta?: string;
}

export function chatPage(models: readonly Model[]): HTMLElement {
  const turns: Turn[] = [];
  let running: AbortController | null = null;

  const model = modelSelect("chat-model", models);
  const system = h("textarea", { id: "chat-system", rows: 3, placeholder: "You are a helpful assistant." });
  const sampling = samplingControls("chat");
  const format = h(
    "select",
    { id: "chat-format" },
    h("option", { value: "text" }, "Text"),
    h("option", { value: "json_object" }, "JSON object"),
    h("option", { value: "json_schema" }, "JSON schema"),
  );
  const schema = h("textarea", {
    id: "chat-schema",
    rows: 6,
    spellcheck: "false",
    placeholder: '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}',
  });
  const schemaField = field("Schema", schema, "The answer is constrained to match it");
  schemaField.hidden = true;
  format.addEventListener("change", () => (schemaField.hidden = format.value !== "json_schema"));

  const list = h("ol", { class: "messages", id: "chat-messages", "aria-label": "Conversation" });
  const input = h("textarea", {
    id: "chat-input",
    rows: 3,
    placeholder: "Message (Enter sends, Shift+Enter for a new line)",
    "aria-label": "Message",
    required: true,
  });
  const send = h("button", { type: "submit", id: "chat-send" }, "Send");
  const stop = h("button", { type: "button", id: "chat-stop", class: "danger", disabled: true }, "Stop");
  const edit = h("button", { type: "button", id: "chat-edit", class: "secondary", disabled: true }, "Edit last message");
  const reset = h("button", { type: "button", id: "chat-reset", class: "secondary" }, "Reset");
  const status = statusLine();
  status.id = "chat-status";
  const error = errorLine();
  error.id = "chat-error";
  const images = imagePicker(
    "chat",
    // With an image attached, the text may be left empty.
    () => (input.required = images.attached.length === 0),
    (refused) => showError(error, refused),
  );
  const form = h(
    "form",
    { class: "composer", id: "chat-form" },
    input,
    images.previews,
    h("div", { class: "buttons" }, images.button, images.input, send, stop, edit, reset),
  );
  const readsImages = () => models.find((entry) => entry.id === model.value)?.capabilities?.includes("vision") ?? false;
  const offerImages = () =>
    images.setEnabled(readsImages(), `${model.value || "This model"} reads no images (it has no vision projector).`);
  model.addEventListener("change", offerImages);
  offerImages();

  const code = h("code", { id: "chat-code" });
  let language: Language = "curl";
  const tabs = LANGUAGES.map(({ id, label }) =>
    h(
      "button",
      {
        type: "button",
        role: "tab",
        id: `chat-code-${id}`,
        "aria-controls": "chat-code-block",
        "aria-selected": String(id === language),
        onclick: () => showCode(id),
      },
      label,
    ),
  );
  const codePanel = h(
    "details",
    { class: "code-panel", id: "chat-code-panel" },
    h("summary", {}, "Copy as code"),
    h("p", { class: "hint" }, "The chat as it stands, as a request to the API. Set MODELHOST_API_KEY to one of your tokens."),
    h("div", { role: "tablist", "aria-label": "Language" }, ...tabs),
    h("pre", { id: "chat-code-block", role: "tabpanel", tabindex: 0, "aria-label": "Code" }, code),
    copyButton("Copy code", () => code.textContent ?? ""),
  );
  codePanel.addEventListener("toggle", () => codePanel.open && showCode(language));

  function showCode(next: Language): void {
    language = next;
    for (const tab of tabs) tab.setAttribute("aria-selected", String(tab.id === `chat-code-${next}`));
    const draft: Turn = { role: "user", content: input.value.trim(), images: images.attached };
    const conversation = draft.content || images.attached.length > 0 ? [...turns, draft] : turns;
    const body = requestBody(conversation);
    // The snippets read each image from a file of the name it was attached with.
    const names = new Map(conversation.flatMap((turn) => turn.images ?? []).map((image) => [image.url, image.name]));
    code.textContent = body instanceof Error ? body.message : codeFor(next, body, `${location.origin}/v1`, names);
  }

  function responseFormat(): ResponseFormat | Error | undefined {
    switch (format.value) {
      case "json_object":
        return { type: "json_object" };
      case "json_schema":
        try {
          return { type: "json_schema", json_schema: { name: "answer", schema: JSON.parse(schema.value) as unknown, strict: true } };
        } catch (parseError) {
          return new Error(`The schema is not valid JSON: ${errorMessage(parseError)}`);
        }
      default:
        return undefined;
    }
  }

  function requestBody(conversation: readonly Turn[]): ChatBody | Error {
    const responseFormatValue = responseFormat();
    if (responseFormatValue instanceof Error) return responseFormatValue;
    const messages: ChatMessage[] = [];
    if (system.value.trim()) messages.push({ role: "system", content: system.value });
    for (const turn of conversation) messages.push({ role: turn.role, content: userContent(turn.content, turn.images) });
    return { model: model.value, messages, ...sampling.values(), ...(responseFormatValue ? { response_format: responseFormatValue } : {}) };
  }

  function turnElement(turn: Turn): HTMLLIElement {
    const content = h("div", { class: turn.role === "assistant" ? "content markdown" : "content plain" });
    // The user's own words are shown as typed (text); answers as sanitised Markdown.
    if (turn.role === "assistant") renderMarkdown(content, turn.content);
    else content.textContent = turn.content;
    return h(
      "li",
      { class: `message ${turn.role}` },
      h("div", { class: "role" }, turn.role === "user" ? "You" : "Assistant"),
      content,
      turn.images?.length ? thumbnails(turn.images, "Images sent") : null,
      turn.meta ? h("div", { class: "meta" }, turn.meta) : null,
    );
  }

  function renderTurns(): void {
    list.replaceChildren(...turns.map(turnElement));
    const canEdit = !running && turns.some((turn) => turn.role === "user");
    edit.disabled = !canEdit;
  }

  function setRunning(controller: AbortController | null): void {
    running = controller;
    send.disabled = controller !== null;
    stop.disabled = controller === null;
    edit.disabled = controller !== null || !turns.some((turn) => turn.role === "user");
  }

  async function submit(): Promise<void> {
    showError(error, null);
    const text = input.value;
    const attached = images.attached;
    if ((!text.trim() && attached.length === 0) || running) return;
    if (!model.value) return showError(error, new Error("This server lists no models."));
    const turn: Turn = { role: "user", content: text, images: attached };
    const body = requestBody([...turns, turn]);
    if (body instanceof Error) return showError(error, body);

    turns.push(turn);
    input.value = "";
    images.set([]);
    renderTurns();
    const content = h("div", { class: "content markdown" });
    const meta = h("div", { class: "meta" }, `${body.model} · waiting…`);
    list.append(h("li", { class: "message assistant streaming" }, h("div", { class: "role" }, "Assistant"), content, meta));
    const answer = new StreamingAnswer(content);
    const controller = new AbortController();
    setRunning(controller);
    status.textContent = `Asking ${body.model}…`;
    try {
      const result = await streamChat(body, controller.signal, (delta) => {
        if (answer.text === "") meta.textContent = `${body.model} · answering…`;
        answer.append(delta);
      });
      answer.finish();
      turns.push({ role: "assistant", content: answer.text, meta: `${body.model} · ${describeResult(result)}` });
      status.textContent = result.finishReason === "aborted" ? "Stopped." : "Answer complete.";
    } catch (failure) {
      // Nothing was answered: the message and its images go back into the box, to send again or
      // change (a refused image removed, say).
      turns.pop();
      input.value = text;
      images.set(attached);
      showError(error, failure);
      status.textContent = "";
    } finally {
      setRunning(null);
      renderTurns();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void submit();
  });
  // An image pasted into the message (a screenshot, say) is attached; text pastes as usual.
  input.addEventListener("paste", (event) => images.paste(event));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stop.addEventListener("click", () => running?.abort());
  reset.addEventListener("click", () => {
    running?.abort();
    turns.length = 0;
    showError(error, null);
    status.textContent = "Conversation cleared.";
    renderTurns();
  });
  edit.addEventListener("click", () => {
    // The last message of yours, back in the box; it and everything after it leave the conversation.
    const index = turns.map((turn) => turn.role).lastIndexOf("user");
    if (index < 0) return;
    input.value = turns[index]?.content ?? "";
    images.set(turns[index]?.images ?? []);
    turns.length = index;
    renderTurns();
    status.textContent = "Editing the last message: change it and send.";
    input.focus();
  });

  const settings = h(
    "aside",
    { class: "settings", "aria-label": "Chat settings" },
    field("Model", model),
    field("System prompt", system),
    sampling.element,
    field("Response format", format),
    schemaField,
  );
  return h(
    "section",
    { class: "page chat-page", "aria-labelledby": "chat-title" },
    h("h2", { id: "chat-title" }, "Chat"),
    h("div", { class: "two-columns" }, settings, h("div", { class: "conversation" }, list, error, form, status, codePanel)),
  );
}
