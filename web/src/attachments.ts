// Images attached to a chat message, for models that read them (GET /v1/models lists "vision" in
// their capabilities). Each image travels as a data: URL in an image_url content part; the page
// only reads the file and checks its size: the server checks what it is (format, pixels, count)
// and answers a 400 the page shows like any other error.
import type { ContentPart } from "./chatStream";
import { h } from "./dom";

export interface Attachment {
  /** The file's name, shown as the thumbnail's text alternative and used by "Copy as code". */
  name: string;
  /** `data:image/png;base64,…` */
  url: string;
}

/** The server's default --max-image-bytes (10 MiB): larger files are refused here, before reading them. */
export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

/** What the server takes (PNG, JPEG, GIF, BMP, WebP); the file dialog offers these. */
const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,image/bmp";

/** A user message's content: the text alone, or (with images) a text part then one part per image. */
export function userContent(text: string, images: readonly Attachment[] = []): string | ContentPart[] {
  if (images.length === 0) return text;
  return [
    ...(text.trim() ? [{ type: "text" as const, text }] : []),
    ...images.map((image): ContentPart => ({ type: "image_url", image_url: { url: image.url } })),
  ];
}

/** Thumbnails of images: `<img>` elements whose source is the image's own data URL, never markup. */
export function thumbnails(images: readonly Attachment[], label: string, remove?: (index: number) => void): HTMLUListElement {
  return h(
    "ul",
    { class: "thumbnails", "aria-label": label },
    ...images.map((image, index) =>
      h(
        "li",
        {},
        h("img", { src: image.url, alt: image.name, title: image.name }),
        remove
          ? h(
              "button",
              { type: "button", class: "secondary small", "aria-label": `Remove ${image.name}`, onclick: () => remove(index) },
              "Remove",
            )
          : null,
      ),
    ),
  );
}

export interface ImagePicker {
  /** "Attach image": opens the file dialog. */
  button: HTMLButtonElement;
  /** The hidden file input behind the button. */
  input: HTMLInputElement;
  /** The thumbnails of the images attached so far (hidden while there are none). */
  previews: HTMLElement;
  /** The images attached, in order. */
  readonly attached: readonly Attachment[];
  /** Replaces the images attached (an edited or refused message puts its images back). */
  set(images: readonly Attachment[]): void;
  /** Attaches the image files of a paste (a textarea takes only its text). */
  paste(event: ClipboardEvent): void;
  /** Offers the button, or disables it with `reason` as its title. */
  setEnabled(enabled: boolean, reason: string): void;
}

/**
 * An "Attach image" button, its file input and the thumbnails of what is attached, each with a
 * Remove button. `onChange` runs after every change; `onError` gets the files refused here (too
 * large, unreadable) each time files are added, or null when none was.
 */
export function imagePicker(prefix: string, onChange: () => void, onError: (error: Error | null) => void): ImagePicker {
  let attached: Attachment[] = [];
  const input = h("input", { type: "file", id: `${prefix}-image-input`, accept: ACCEPT, multiple: true, hidden: true });
  const button = h("button", { type: "button", id: `${prefix}-attach`, class: "secondary" }, "Attach image");
  const previews = h("div", { id: `${prefix}-attachments`, hidden: true });
  button.addEventListener("click", () => input.click());

  const set = (images: readonly Attachment[]): void => {
    attached = [...images];
    previews.replaceChildren(
      thumbnails(attached, "Images to send", (index) => {
        set(attached.filter((_, at) => at !== index));
        button.focus();
      }),
    );
    previews.hidden = attached.length === 0;
    onChange();
  };

  const add = async (files: readonly File[]): Promise<void> => {
    const read: Attachment[] = [];
    const refused: string[] = [];
    for (const file of files) {
      const name = file.name || "image";
      if (file.size > MAX_IMAGE_BYTES) {
        refused.push(`${name} is ${mebibytes(file.size)}: an image may be at most ${mebibytes(MAX_IMAGE_BYTES)}.`);
        continue;
      }
      try {
        read.push({ name, url: await dataUrl(file) });
      } catch {
        refused.push(`${name} could not be read.`);
      }
    }
    onError(refused.length > 0 ? new Error(refused.join(" ")) : null);
    if (read.length > 0) set([...attached, ...read]);
  };

  input.addEventListener("change", () => {
    const files = [...(input.files ?? [])];
    // Cleared, so choosing the same file again (after removing it) fires `change` again.
    input.value = "";
    void add(files);
  });

  return {
    button,
    input,
    previews,
    get attached() {
      return attached;
    },
    set,
    paste(event) {
      const files = [...(event.clipboardData?.files ?? [])].filter((file) => file.type.startsWith("image/"));
      if (!button.disabled && files.length > 0) void add(files);
    },
    setEnabled(enabled, reason) {
      button.disabled = !enabled;
      input.disabled = !enabled;
      if (enabled) button.removeAttribute("title");
      else button.title = reason;
    },
  };
}

function dataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    // A file of no known type is read as application/octet-stream, which the server would hold
    // against a PNG's bytes; declaring no type leaves the bytes to decide.
    reader.addEventListener("load", () => resolve(String(reader.result).replace(/^data:application\/octet-stream;/, "data:;")));
    reader.addEventListener("error", () => reject(reader.error ?? new Error("unreadable")));
    reader.readAsDataURL(file);
  });
}

function mebibytes(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}
