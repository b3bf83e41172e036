// A tiny element builder: the page has no framework. Text is only ever set as text nodes (never as
// HTML); the one place HTML is inserted is markdown.ts, through DOMPurify.

/** A page of the playground: built once, kept while hidden (a chat survives a look at the tokens). */
export interface Page {
  element: HTMLElement;
  /** Called each time the page is shown. */
  refresh?(): void;
}

type Child = Node | string | number | null | undefined | false;
type Attributes = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/**
 * `h("button", { type: "button", onclick: go }, "Send")`. Attributes whose value is a function are
 * listeners (`onclick` → "click"); `true` sets a boolean attribute, `false`/null/undefined leave it out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

function setAttributes(element: Element, attributes: Attributes): void {
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value != null) element.setAttribute(name, String(value));
  }
}

function append(parent: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === "number" ? String(child) : child);
  }
}

/** A labelled form control: `<label>Text <control></label>`, so clicking the text focuses it. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return h("label", { class: "field" }, h("span", { class: "label" }, label), control, hint ? h("small", { class: "hint" }, hint) : null);
}

/** A status line that screen readers announce when it changes. */
export function statusLine(className = "status"): HTMLParagraphElement {
  return h("p", { class: className, role: "status", "aria-live": "polite" });
}

/** An error line (role=alert); empty and hidden until `showError`. */
export function errorLine(): HTMLParagraphElement {
  return h("p", { class: "error", role: "alert", hidden: true });
}

export function showError(line: HTMLElement, error: unknown): void {
  line.textContent = error === null ? "" : errorMessage(error);
  line.hidden = error === null;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Copies text, with a fallback for pages served over plain HTTP on another host (no Clipboard API there). */
export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = h("textarea", { class: "offscreen", readonly: true });
  area.value = text;
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

/** A button that copies `text()` and says so for two seconds. */
export function copyButton(label: string, text: () => string): HTMLButtonElement {
  const button = h("button", { type: "button", class: "secondary" }, label);
  button.addEventListener("click", async () => {
    try {
      await copyText(text());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed: select and copy by hand";
    }
    setTimeout(() => (button.textContent = label), 2000);
  });
  return button;
}

export function formatNumber(value: number): string {
  return value.toLocaleString("en-US");
}

/**
 * "2026-11-23 14:03" in UTC, or "—". UTC, as everything else the page shows (usage days, the
 * expiry date picked, which ends that UTC day); where a time is shown, the page says "(UTC)".
 */
export function formatTime(unixSeconds: number | null | undefined): string {
  if (unixSeconds == null) return "—";
  return new Date(unixSeconds * 1000).toISOString().slice(0, 16).replace("T", " ");
}
