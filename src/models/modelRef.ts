import { ServerError } from "../core/ServerError.js";

/** What `pull` was asked for: a file or quantization in a hub repository, or a plain URL. */
export type ModelRef =
  { kind: "hub"; name: string; repo: string; file?: string; quant?: string } | { kind: "url"; name: string; url: string };

const hubHosts = /^(?:https?:\/\/)?(?:hf\.co|huggingface\.co)\//i;
const repoPart = "[A-Za-z0-9][A-Za-z0-9._-]*";
const repoPattern = new RegExp(`^(${repoPart}/${repoPart})(?::([^/:]+))?$`);
const filePattern = new RegExp(`^(${repoPart}/${repoPart})/(.+\\.gguf)$`, "i");

/**
 * Reads the forms people type: `hf.co/OWNER/REPO:QUANT` (Ollama's form; `huggingface.co/` too),
 * `OWNER/REPO:QUANT`, either without `:QUANT` (or with `:latest`) for the default quantization,
 * `hf.co/OWNER/REPO/FILE.gguf`, and an `https://` URL of a `.gguf` file. A hub page URL
 * (`…/blob/main/FILE.gguf`) is read as the file it shows.
 */
export function parseModelRef(input: string): ModelRef {
  const name = input.trim();
  const page = /^https:\/\/(?:hf\.co|huggingface\.co)\/([^/]+\/[^/]+)\/(?:blob|resolve)\/main\/(.+\.gguf)(?:\?.*)?$/i.exec(name);
  if (page) return { kind: "hub", name, repo: page[1]!, file: decodeURIComponent(page[2]!) };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(name) && !hubHosts.test(name)) return parseUrl(name);
  const rest = name.replace(hubHosts, "");
  const file = filePattern.exec(rest);
  if (file) return { kind: "hub", name, repo: file[1]!, file: file[2]! };
  const repo = repoPattern.exec(rest);
  if (repo) {
    const tag = repo[2];
    if (tag !== undefined && /\.gguf$/i.test(tag)) return { kind: "hub", name, repo: repo[1]!, file: tag };
    return { kind: "hub", name, repo: repo[1]!, ...(tag === undefined || tag.toLowerCase() === "latest" ? {} : { quant: tag }) };
  }
  throw new ServerError("invalid_request", {
    param: "model",
    message:
      `"${name}" is not a model reference modelhost can pull. Use hf.co/OWNER/REPO:QUANT (e.g. ` +
      "hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M), OWNER/REPO:QUANT, hf.co/OWNER/REPO/FILE.gguf, or an https:// URL of a .gguf file.",
  });
}

function parseUrl(name: string): ModelRef {
  let url: URL;
  try {
    url = new URL(name);
  } catch {
    throw new ServerError("invalid_request", { param: "model", message: `"${name}" is not a valid URL.` });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ServerError("invalid_request", {
      param: "model",
      message: `Only https:// URLs (http:// where --allow-http-pull allows it) can be pulled, not ${url.protocol}.`,
    });
  }
  if (!/\.gguf$/i.test(url.pathname)) {
    throw new ServerError("invalid_request", { param: "model", message: `"${name}" does not name a .gguf file.` });
  }
  return { kind: "url", name, url: url.href };
}
