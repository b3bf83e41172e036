// Model output rendered as Markdown, and never as HTML: raw HTML in the output (`<script>`,
// `<img onerror=…>`, …) is escaped by the renderer, so it shows as the text the model wrote; what
// marked produces then goes through DOMPurify all the same, in case a Markdown construct yields
// markup of its own (a `javascript:` link, say). Markdown images become plain links: the page
// fetches nothing the model names.
import DOMPurify from "dompurify";
import { Marked } from "marked";

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char] ?? char);
}

const marked = new Marked({
  gfm: true,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  // Links in model output open elsewhere, without giving the new page a handle on this one.
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** Replaces the element's content with the Markdown rendered as sanitised HTML. */
export function renderMarkdown(element: HTMLElement, markdown: string): void {
  const html = marked.parse(markdown, { async: false });
  element.replaceChildren(
    purify.sanitize(html, { RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select"] }),
  );
}
