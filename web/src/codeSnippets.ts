// "Copy as code": the chat as it stands, as a request to the token-authenticated API (/v1), in
// curl, JavaScript with the `openai` package, and Python with the `openai` package. The key is
// always a placeholder read from the environment, never a real token: the page has none.
import type { ChatBody } from "./chatStream";

export const KEY_VARIABLE = "MODELHOST_API_KEY";

export type Language = "curl" | "javascript" | "python";

export const LANGUAGES: readonly { id: Language; label: string }[] = [
  { id: "curl", label: "curl" },
  { id: "javascript", label: "JavaScript" },
  { id: "python", label: "Python" },
];

export function codeFor(language: Language, body: ChatBody, baseURL: string): string {
  switch (language) {
    case "curl":
      return curl(body, baseURL);
    case "javascript":
      return javascript(body, baseURL);
    case "python":
      return python(body, baseURL);
    default:
      return language satisfies never;
  }
}

function curl(body: ChatBody, baseURL: string): string {
  // Single-quoted for the shell: a ' inside ends the quote, adds an escaped one and reopens it.
  const data = JSON.stringify(body, null, 2).replace(/'/g, `'\\''`);
  return [
    `curl ${baseURL}/chat/completions \\`,
    `  -H "Authorization: Bearer $${KEY_VARIABLE}" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '${data}'`,
  ].join("\n");
}

function javascript(body: ChatBody, baseURL: string): string {
  return [
    `import OpenAI from "openai";`,
    ``,
    `const client = new OpenAI({ baseURL: ${JSON.stringify(baseURL)}, apiKey: process.env.${KEY_VARIABLE} });`,
    `const completion = await client.chat.completions.create(${JSON.stringify(body, null, 2)});`,
    `console.log(completion.choices[0].message.content);`,
  ].join("\n");
}

function python(body: ChatBody, baseURL: string): string {
  const args = Object.entries(body).map(([key, value]) => `    ${key}=${pythonLiteral(value, "    ")},`);
  return [
    `import os`,
    `from openai import OpenAI`,
    ``,
    `client = OpenAI(base_url=${JSON.stringify(baseURL)}, api_key=os.environ["${KEY_VARIABLE}"])`,
    `completion = client.chat.completions.create(`,
    ...args,
    `)`,
    `print(completion.choices[0].message.content)`,
  ].join("\n");
}

/** A JSON value as a Python literal (JSON strings are valid Python strings; true/false/null are not). */
function pythonLiteral(value: unknown, indent: string): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "string" || typeof value === "number") return JSON.stringify(value);
  const inner = `${indent}    `;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[\n${value.map((item) => `${inner}${pythonLiteral(item, inner)},`).join("\n")}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return "{}";
  return `{\n${entries.map(([key, item]) => `${inner}${JSON.stringify(key)}: ${pythonLiteral(item, inner)},`).join("\n")}\n${indent}}`;
}
