// "Copy as code": the chat as it stands, as a request to the token-authenticated API (/v1), in
// curl, JavaScript with the `openai` package, and Python with the `openai` package. The key is
// always a placeholder read from the environment, never a real token: the page has none. Images
// are read from files named as the ones attached, not written out: a photo is megabytes of base64.
import type { ChatBody } from "./chatStream";

export const KEY_VARIABLE = "MODELHOST_API_KEY";

export type Language = "curl" | "javascript" | "python";

export const LANGUAGES: readonly { id: Language; label: string }[] = [
  { id: "curl", label: "curl" },
  { id: "javascript", label: "JavaScript" },
  { id: "python", label: "Python" },
];

/** `imageNames`: an image's data URL → the name of the file it was attached from. */
export function codeFor(language: Language, body: ChatBody, baseURL: string, imageNames: ReadonlyMap<string, string> = new Map()): string {
  switch (language) {
    case "curl":
      return curl(body, baseURL, imageNames);
    case "javascript":
      return javascript(body, baseURL, imageNames);
    case "python":
      return python(body, baseURL, imageNames);
    default:
      return language satisfies never;
  }
}

/** Code written into a literal as it stands: an image's variable where the body has its data URL. */
class Code {
  constructor(readonly code: string) {}
}

/** An image of the chat, as a snippet reads it: from `file`, as a data URL starting `prefix`. */
interface ImageFile {
  file: string;
  /** `data:image/png;base64,` */
  prefix: string;
}

/**
 * The body with each image_url's data URL replaced by `reference(n)` (n from 1, one per distinct
 * image), and the files the snippet reads them from: the attached file's name, or image-n.
 */
function withImageFiles(body: ChatBody, names: ReadonlyMap<string, string>, reference: (n: number) => string) {
  const images = new Map<string, ImageFile & { code: Code }>();
  const taken = new Set<string>();
  const messages = body.messages.map((message) => {
    if (typeof message.content === "string") return message;
    const content = message.content.map((part) => {
      const url = part.type === "image_url" ? part.image_url.url : "";
      const comma = url.indexOf(",");
      if (!url.startsWith("data:") || comma < 0) return part;
      let image = images.get(url);
      if (!image) {
        const prefix = url.slice(0, comma + 1);
        const file = uniqueName(names.get(url) ?? `image-${images.size + 1}${extension(prefix)}`, taken);
        image = { file, prefix, code: new Code(reference(images.size + 1)) };
        images.set(url, image);
      }
      return { type: "image_url", image_url: { url: image.code } };
    });
    return { ...message, content };
  });
  return { body: { ...body, messages }, images: [...images.values()] };
}

/** `name`, or `name-2.png`, `name-3.png`… when another image already has it (two pasted image.png). */
function uniqueName(name: string, taken: Set<string>): string {
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  let unique = name;
  for (let n = 2; taken.has(unique); n++) unique = `${stem}-${n}${ext}`;
  taken.add(unique);
  return unique;
}

function extension(prefix: string): string {
  const subtype = /^data:image\/([a-z]+)/i.exec(prefix)?.[1]?.toLowerCase();
  return subtype ? `.${subtype === "jpeg" ? "jpg" : subtype}` : "";
}

const IMAGES_COMMENT = "The chat's images are read from these files in the current directory: save the ones you attached there.";

/** Single-quoted for the shell: a ' inside ends the quote, adds an escaped one and reopens it. */
const shellQuoted = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

function curl(chat: ChatBody, baseURL: string, names: ReadonlyMap<string, string>): string {
  // Inside the single-quoted body, an image closes the quote, expands its variable and reopens it.
  const { body, images } = withImageFiles(chat, names, (n) => `"'"$IMAGE_${n}"'"`);
  const data = literal(body, JSON_SYNTAX, "", (text) => text.replace(/'/g, `'\\''`));
  const headers = [`  -H "Authorization: Bearer $${KEY_VARIABLE}" \\`, `  -H "Content-Type: application/json" \\`];
  if (images.length === 0) return [`curl ${baseURL}/chat/completions \\`, ...headers, `  -d '${data}'`].join("\n");
  // With images the body is too long for one argument (Linux allows 128 KiB): `printf`, a shell
  // builtin, hands it to curl's standard input instead. `tr` joins the lines base64 wraps.
  return [
    `# ${IMAGES_COMMENT}`,
    ...images.map(({ file, prefix }, index) => `IMAGE_${index + 1}=${shellQuoted(prefix)}"$(base64 < ${shellQuoted(file)} | tr -d '\\n')"`),
    `printf '%s' '${data}' | curl ${baseURL}/chat/completions \\`,
    ...headers,
    `  --data-binary @-`,
  ].join("\n");
}

function javascript(chat: ChatBody, baseURL: string, names: ReadonlyMap<string, string>): string {
  const { body, images } = withImageFiles(chat, names, (n) => `image${n}`);
  return [
    ...(images.length > 0 ? [`import { readFileSync } from "node:fs";`] : []),
    `import OpenAI from "openai";`,
    ``,
    ...(images.length > 0
      ? [
          `// ${IMAGES_COMMENT}`,
          ...images.map(
            ({ file, prefix }, index) =>
              `const image${index + 1} = ${JSON.stringify(prefix)} + readFileSync(${JSON.stringify(file)}, "base64");`,
          ),
          ``,
        ]
      : []),
    `const client = new OpenAI({ baseURL: ${JSON.stringify(baseURL)}, apiKey: process.env.${KEY_VARIABLE} });`,
    `const completion = await client.chat.completions.create(${literal(body, JSON_SYNTAX, "")});`,
    `console.log(completion.choices[0].message.content);`,
  ].join("\n");
}

function python(chat: ChatBody, baseURL: string, names: ReadonlyMap<string, string>): string {
  const { body, images } = withImageFiles(chat, names, (n) => `image_${n}`);
  const args = Object.entries(body).map(([key, value]) => `    ${key}=${literal(value, PYTHON_SYNTAX, "    ")},`);
  return [
    ...(images.length > 0 ? [`import base64`] : []),
    `import os`,
    ...(images.length > 0 ? [`from pathlib import Path`] : []),
    ``,
    `from openai import OpenAI`,
    ``,
    ...(images.length > 0
      ? [
          `# ${IMAGES_COMMENT}`,
          ...images.map(
            ({ file, prefix }, index) =>
              `image_${index + 1} = ${JSON.stringify(prefix)} + base64.b64encode(Path(${JSON.stringify(file)}).read_bytes()).decode()`,
          ),
          ``,
        ]
      : []),
    `client = OpenAI(base_url=${JSON.stringify(baseURL)}, api_key=os.environ["${KEY_VARIABLE}"])`,
    `completion = client.chat.completions.create(`,
    ...args,
    `)`,
    `print(completion.choices[0].message.content)`,
  ].join("\n");
}

/** How a language writes JSON's values: its keywords, its indent step, and whether items end with a comma. */
interface Syntax {
  keywords: { true: string; false: string; null: string };
  step: string;
  trailingComma: boolean;
}

/** JSON as JSON.stringify(value, null, 2) writes it, which is JavaScript too. */
const JSON_SYNTAX: Syntax = { keywords: { true: "true", false: "false", null: "null" }, step: "  ", trailingComma: false };
/** JSON strings are valid Python strings; true/false/null are not. */
const PYTHON_SYNTAX: Syntax = { keywords: { true: "True", false: "False", null: "None" }, step: "    ", trailingComma: true };

/** A JSON value as a literal of `syntax`, its lines after the first indented by `indent`; `quote` escapes each string and key. */
function literal(value: unknown, syntax: Syntax, indent: string, quote: (text: string) => string = (text) => text): string {
  if (value instanceof Code) return value.code;
  if (value === null || value === undefined) return syntax.keywords.null;
  if (value === true || value === false) return value ? syntax.keywords.true : syntax.keywords.false;
  if (typeof value === "string" || typeof value === "number") return quote(JSON.stringify(value));
  const inner = indent + syntax.step;
  const lines = (items: string[], open: string, close: string) =>
    items.length === 0
      ? `${open}${close}`
      : `${open}\n${items.map((item) => `${inner}${item}`).join(`,\n`)}${syntax.trailingComma ? "," : ""}\n${indent}${close}`;
  if (Array.isArray(value))
    return lines(
      value.map((item: unknown) => literal(item, syntax, inner, quote)),
      "[",
      "]",
    );
  const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined);
  return lines(
    entries.map(([key, item]) => `${quote(JSON.stringify(key))}: ${literal(item, syntax, inner, quote)}`),
    "{",
    "}",
  );
}
