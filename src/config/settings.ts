import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { KV_CACHE_TYPES } from "../core/KvCacheType.js";
import { parseByteSize } from "./parseByteSize.js";
import { parseDuration } from "./parseDuration.js";

/** The commands a setting can apply to. */
export type CommandName = "serve" | "models" | "pull" | "client" | "engine" | "access";

/**
 * One setting, declared once: its CLI flag, environment variable, default (as the text a user would
 * type, so --help shows it verbatim) and a schema that turns that text into a typed value.
 */
export interface Setting<T> {
  flag: string;
  env: string;
  default: string;
  description: string;
  schema: z.ZodType<T, string>;
  commands: readonly CommandName[];
}

function setting<T>(spec: Setting<T>): Setting<T> {
  return spec;
}

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, "must be an integer")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const duration = z.string().transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined) ctx.addIssue({ code: "custom", message: 'must be a duration such as "5m", "30s" or "-1" (never)' });
  return ms ?? 0;
});

const byteSize = z.string().transform((text, ctx) => {
  const bytes = parseByteSize(text);
  if (bytes === undefined || bytes <= 0) ctx.addIssue({ code: "custom", message: 'must be a size such as "10mb" or "65536"' });
  return bytes ?? 0;
});

/** A time limit on clients: a positive, finite duration. */
const timeout = duration.refine((ms) => ms > 0 && Number.isFinite(ms), 'must be a positive duration such as "30s" or "500ms"');

/** A time limit that may be turned off with "0". */
const optionalTimeout = duration.refine((ms) => ms >= 0 && Number.isFinite(ms), 'must be a duration such as "30s", or "0" for none');

const directory = z
  .string()
  .trim()
  .min(1)
  .transform((text) => path.resolve(text === "~" || text.startsWith("~/") ? path.join(os.homedir(), text.slice(1)) : text));

const boolean = z.string().transform((text, ctx) => {
  const value = { true: true, false: false }[text.trim().toLowerCase()];
  if (value === undefined) ctx.addIssue({ code: "custom", message: 'must be "true" or "false"' });
  return value ?? false;
});

const list = z.string().transform((text) =>
  text
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean),
);

export const settings = {
  profile: setting({
    flag: "profile",
    env: "MODELHOST_PROFILE",
    default: "local",
    description:
      '"local": no credentials, for one machine. "hosted": personal access tokens (Bearer), accounts, tiers with rate limits, usage accounting.',
    schema: z.enum(["local", "hosted"]),
    commands: ["serve"],
  }),
  host: setting({
    flag: "host",
    env: "MODELHOST_HOST",
    default: "127.0.0.1",
    description: "Address to listen on. Use 0.0.0.0 to accept connections from other machines.",
    schema: z.string().trim().min(1),
    commands: ["serve", "client"],
  }),
  port: setting({
    flag: "port",
    env: "MODELHOST_PORT",
    default: "auto",
    description: 'TCP port to listen on ("auto": 11434 for the local profile, 8080 for hosted; 0 picks a free port).',
    schema: z.union([z.literal("auto"), integer(0, 65535)]),
    commands: ["serve", "client"],
  }),
  modelsDir: setting({
    flag: "models-dir",
    env: "MODELHOST_MODELS_DIR",
    default: "~/.modelhost/models",
    description: "Directory of .gguf model files (and an optional models.json manifest of ids and aliases).",
    schema: directory,
    commands: ["serve", "models", "pull"],
  }),
  pull: setting({
    flag: "pull",
    env: "MODELHOST_PULL",
    default: "",
    description:
      "Models to pull before serving, comma-separated (hf.co/OWNER/REPO:QUANT, OWNER/REPO:QUANT, hf.co/OWNER/REPO/FILE.gguf or an https:// URL); ones already present are not fetched again.",
    schema: list,
    commands: ["serve"],
  }),
  hfEndpoint: setting({
    flag: "hf-endpoint",
    env: "MODELHOST_HF_ENDPOINT",
    default: "https://huggingface.co",
    description: "Hugging Face hub (or a mirror) that `pull` and --pull fetch models from.",
    schema: z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, "")),
    commands: ["serve", "pull"],
  }),
  allowHttpPull: setting({
    flag: "allow-http-pull",
    env: "MODELHOST_ALLOW_HTTP_PULL",
    default: "false",
    description:
      '"true" lets `pull`, --pull and POST /api/pull fetch plain http:// URLs (and follow redirects to http://), which anyone on the way can alter. Off, only https is fetched, unless --hf-endpoint is itself http://.',
    schema: boolean,
    commands: ["serve", "pull"],
  }),
  hfToken: setting({
    flag: "hf-token",
    env: "HF_TOKEN",
    default: "",
    description:
      "Hugging Face access token, for gated or private repositories. Prefer the variable: a flag shows in process listings. Never logged.",
    schema: z.string().trim(),
    commands: ["serve", "pull"],
  }),
  dataDir: setting({
    flag: "data-dir",
    env: "MODELHOST_DATA_DIR",
    default: "~/.modelhost",
    description:
      "State: the SQLite database of stored responses (Responses API) and, in the hosted profile, of accounts, tokens, usage and rate-limit counters, unless --database-url/--redis-url say otherwise.",
    schema: directory,
    commands: ["serve", "access"],
  }),
  databaseUrl: setting({
    flag: "database-url",
    env: "MODELHOST_DATABASE_URL",
    default: "",
    description:
      "PostgreSQL URL (postgres://…) for accounts, tokens, usage and (hosted profile) stored responses, shared by several replicas. Empty: SQLite in --data-dir.",
    schema: z.string().trim(),
    commands: ["serve", "access"],
  }),
  redisUrl: setting({
    flag: "redis-url",
    env: "MODELHOST_REDIS_URL",
    default: "",
    description:
      "Redis URL (redis://…) for rate-limit counters shared by several replicas. If Redis is unreachable, requests get 503 (fail closed). Empty: SQLite in --data-dir.",
    schema: z.string().trim(),
    commands: ["serve"],
  }),
  tiersFile: setting({
    flag: "tiers-file",
    env: "MODELHOST_TIERS_FILE",
    default: "",
    description:
      'JSON file of tiers and their limits (see docs/hosted.md). Empty: one tier, "free": 15 requests per minute, 150,000 tokens per day.',
    schema: z.string().trim(),
    commands: ["serve", "access"],
  }),
  responseExpiry: setting({
    flag: "response-expiry",
    env: "MODELHOST_RESPONSE_EXPIRY",
    default: "30d",
    description:
      "How long a response stored by the Responses API (`store`, the default) stays retrievable and continuable with previous_response_id; then it is deleted. Stored in --data-dir's SQLite database, or with --database-url (hosted profile) in PostgreSQL.",
    schema: duration.refine((ms) => ms > 0 && Number.isFinite(ms), 'must be a positive duration such as "30d" or "12h"'),
    commands: ["serve"],
  }),
  publicUrl: setting({
    flag: "public-url",
    env: "MODELHOST_PUBLIC_URL",
    default: "",
    description:
      "The server's address as browsers reach it (https://models.example.com), for the one-time sign-in links `modelhost account sign-in-link` prints. Empty: http://--host:--port.",
    schema: z.union([z.literal(""), z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, ""))]),
    commands: ["serve", "access"],
  }),
  sessionIdleTimeout: setting({
    flag: "session-idle-timeout",
    env: "MODELHOST_SESSION_IDLE_TIMEOUT",
    default: "12h",
    description: "Hosted profile: a playground session unused this long ends (the user signs in again).",
    schema: timeout,
    commands: ["serve"],
  }),
  sessionMaxAge: setting({
    flag: "session-max-age",
    env: "MODELHOST_SESSION_MAX_AGE",
    default: "7d",
    description: "Hosted profile: a playground session ends this long after sign-in, used or not.",
    schema: timeout,
    commands: ["serve"],
  }),
  trustProxy: setting({
    flag: "trust-proxy",
    env: "MODELHOST_TRUST_PROXY",
    default: "",
    description:
      "Addresses or CIDR ranges of reverse proxies whose X-Forwarded-For, -Proto and -Host headers are believed (e.g. 127.0.0.1,10.0.0.0/8): then the client address (sign-in limits, logs), https (Secure cookies) and the origin (CSRF check) come from them. Empty: no proxy is trusted.",
    schema: list,
    commands: ["serve"],
  }),
  maxLoadedModels: setting({
    flag: "max-loaded-models",
    env: "MODELHOST_MAX_LOADED_MODELS",
    default: "2",
    description: "Models kept in memory at once; the least recently used idle one is unloaded to make room.",
    schema: integer(1, 64),
    commands: ["serve"],
  }),
  keepAlive: setting({
    flag: "keep-alive",
    env: "MODELHOST_KEEP_ALIVE",
    default: "5m",
    description: 'How long an idle model stays loaded ("0" unloads at once, "-1" never).',
    schema: duration,
    commands: ["serve"],
  }),
  parallel: setting({
    flag: "parallel",
    env: "MODELHOST_PARALLEL",
    default: "4",
    description: "Requests per model decoded together in one batch (sequences of one llama.cpp context).",
    schema: integer(1, 256),
    commands: ["serve"],
  }),
  maxQueue: setting({
    flag: "max-queue",
    env: "MODELHOST_MAX_QUEUE",
    default: "256",
    description: "Requests per model that may wait for a free sequence; beyond that the server answers 503.",
    schema: integer(0),
    commands: ["serve"],
  }),
  contextSize: setting({
    flag: "context-size",
    env: "MODELHOST_CONTEXT_SIZE",
    default: "4096",
    description: "Context length per sequence, in tokens (capped at the model's trained length). Prompt plus reply must fit.",
    schema: integer(16),
    commands: ["serve"],
  }),
  batchSize: setting({
    flag: "batch-size",
    env: "MODELHOST_BATCH_SIZE",
    default: "512",
    description: "Tokens evaluated per llama.cpp decode call (prompt processing chunk size); also the longest embedding input.",
    schema: integer(1),
    commands: ["serve"],
  }),
  cacheTypeK: setting({
    flag: "cache-type-k",
    env: "MODELHOST_CACHE_TYPE_K",
    default: "f16",
    description: `Type the KV cache stores keys in, as llama-server's --cache-type-k: ${KV_CACHE_TYPES.join(", ")}. q8_0 takes 0.53× the memory of f16, q4_0 0.28×, at some cost in accuracy. Quantized types need the model's head size to be a multiple of 32.`,
    schema: z.enum(KV_CACHE_TYPES),
    commands: ["serve"],
  }),
  cacheTypeV: setting({
    flag: "cache-type-v",
    env: "MODELHOST_CACHE_TYPE_V",
    default: "f16",
    description:
      "Type the KV cache stores values in, as llama-server's --cache-type-v (same types as --cache-type-k). A quantized type turns flash attention on, which llama.cpp requires for it.",
    schema: z.enum(KV_CACHE_TYPES),
    commands: ["serve"],
  }),
  threads: setting({
    flag: "threads",
    env: "MODELHOST_THREADS",
    default: "auto",
    description: 'CPU threads for decoding ("auto" = the cores useful for math on this machine).',
    schema: z.union([z.literal("auto"), integer(1, 1024)]),
    commands: ["serve", "engine"],
  }),
  engine: setting({
    flag: "engine",
    env: "MODELHOST_ENGINE",
    default: "auto",
    description:
      'llama.cpp binary: "native" (built by `modelhost engine build`), "prebuilt" (shipped with node-llama-cpp), or "auto" (native when built).',
    schema: z.enum(["auto", "native", "prebuilt"]),
    commands: ["serve", "engine"],
  }),
  gpu: setting({
    flag: "gpu",
    env: "MODELHOST_GPU",
    default: "off",
    description: 'GPU backend: "off", "auto" (CUDA, Vulkan or Metal when available), "cuda", "vulkan" or "metal".',
    schema: z.enum(["off", "auto", "cuda", "vulkan", "metal"]),
    commands: ["serve", "engine"],
  }),
  corsOrigins: setting({
    flag: "cors-origins",
    env: "MODELHOST_CORS_ORIGINS",
    default: "http://localhost:*,http://127.0.0.1:*,http://[::1]:*",
    description:
      'Comma-separated origins of web pages allowed to call the server ("*" for any; ":*" matches any port). A browser request from any other origin is refused with 403 before it runs: on every route in the local profile, on the playground\'s cookie routes in the hosted one.',
    schema: list,
    commands: ["serve"],
  }),
  allowedHosts: setting({
    flag: "allowed-hosts",
    env: "MODELHOST_ALLOWED_HOSTS",
    default: "",
    description:
      'Comma-separated host names the server answers to besides loopback ones (models.example.com, "*.example.com", "*" for any). Listening on a loopback address, a request for any other Host is refused with 403 (DNS rebinding); listening elsewhere, the list applies when set. Behind --trust-proxy, X-Forwarded-Host is the one checked.',
    schema: list,
    commands: ["serve"],
  }),
  bodyLimit: setting({
    flag: "body-limit",
    env: "MODELHOST_BODY_LIMIT",
    default: "10mb",
    description: "Largest request body accepted; larger ones get 413.",
    schema: byteSize,
    commands: ["serve"],
  }),
  headersTimeout: setting({
    flag: "headers-timeout",
    env: "MODELHOST_HEADERS_TIMEOUT",
    default: "20s",
    description:
      "Time a client has to send a request's headers, from the moment it connects or starts its next request; then 408 and the connection is closed (slowloris defence). At most --request-timeout.",
    schema: timeout,
    commands: ["serve"],
  }),
  requestTimeout: setting({
    flag: "request-timeout",
    env: "MODELHOST_REQUEST_TIMEOUT",
    default: "60s",
    description:
      "Time a client has to send a whole request, headers and body; then 408 and the connection is closed. Covers receiving only: a response, streamed or not, may take as long as it needs.",
    schema: timeout,
    commands: ["serve"],
  }),
  idleConnectionTimeout: setting({
    flag: "idle-connection-timeout",
    env: "MODELHOST_IDLE_CONNECTION_TIMEOUT",
    default: "65s",
    description:
      "How long a keep-alive connection may stay idle between requests before the server closes it. Behind a load balancer, keep it above the balancer's own idle timeout (60s on AWS ALB), so the balancer never reuses a connection the server is closing.",
    schema: timeout,
    commands: ["serve"],
  }),
  maxConnections: setting({
    flag: "max-connections",
    env: "MODELHOST_MAX_CONNECTIONS",
    default: "1024",
    description:
      "Open client connections at most; connections beyond it are closed at once, so a flood of connections cannot exhaust the process's file descriptors and starve the requests being served.",
    schema: integer(1),
    commands: ["serve"],
  }),
  streamStallTimeout: setting({
    flag: "stream-stall-timeout",
    env: "MODELHOST_STREAM_STALL_TIMEOUT",
    default: "60s",
    description:
      "How long a streamed response may wait for a client that reads nothing (its socket buffer full) before the server drops it: such a client would otherwise hold its decoding slot for good.",
    schema: timeout,
    commands: ["serve"],
  }),
  maxGenerationTime: setting({
    flag: "max-generation-time",
    env: "MODELHOST_MAX_GENERATION_TIME",
    default: "10m",
    description:
      'Longest a generation may run, prompt included; then it ends as if max_tokens were reached (finish_reason "length", done_reason "length") with what it has. "0": no limit.',
    schema: optionalTimeout,
    commands: ["serve"],
  }),
  streamKeepalive: setting({
    flag: "stream-keepalive",
    env: "MODELHOST_STREAM_KEEPALIVE",
    default: "15s",
    description:
      'Server-sent event streams send a comment line (": keepalive"; a `ping` event on the Messages API) after this long without an event, e.g. while a long prompt is read, so proxies with idle timeouts (nginx: 60s) keep them open. "0": never. NDJSON streams have no comment syntax and get none.',
    schema: optionalTimeout,
    commands: ["serve"],
  }),
  streamHold: setting({
    flag: "stream-hold",
    env: "MODELHOST_STREAM_HOLD",
    default: "33ms",
    description:
      'How long tokens decoded in a row may wait to be sent together (the first token of a reply never waits): by default two frames of a 60 Hz display, 30 sends a second at most. Each send wakes the server and the client, on the cores decoding uses, so on a small machine holding is faster (docs/performance.md). "16ms": one frame. "0": every token as soon as it is decoded. At most "1s".',
    schema: duration.refine((ms) => ms >= 0 && ms <= 1000, 'must be a duration from "0" to "1s", such as "33ms"'),
    commands: ["serve"],
  }),
  speculation: setting({
    flag: "speculation",
    env: "MODELHOST_SPECULATION",
    default: "none",
    description:
      'Speculative decoding: "ngram" drafts the tokens that followed the last few tokens where they appeared earlier in the prompt or the reply (prompt lookup), and the model checks them in the same decode as its own next token, so a reply that copies its input (a rewrite, a code edit, an answer quoting retrieved text) is written several tokens a decode. What is written is what would be without it, at every temperature. "draft": a model with a draft model (its models.json "draft", or else --draft-model), a smaller model of its vocabulary, drafts with it, the others by n-gram. "none": off.',
    schema: z.enum(["none", "ngram", "draft"]),
    commands: ["serve"],
  }),
  draftModel: setting({
    flag: "draft-model",
    env: "MODELHOST_DRAFT_MODEL",
    default: "",
    description:
      'The model that drafts for the chat models without a "draft" of their own in models.json, with --speculation draft: a smaller model of their vocabulary (as llama-server\'s --model-draft), loaded beside each model it drafts for. A model of another vocabulary is refused when it loads.',
    schema: z.string(),
    commands: ["serve"],
  }),
  draftMax: setting({
    flag: "draft-max",
    env: "MODELHOST_DRAFT_MAX",
    default: "16",
    description:
      "The most tokens one draft may hold (speculative decoding), as llama-server's --draft-max (same default). A draft's length adapts below it to what the model accepts.",
    schema: integer(1),
    commands: ["serve"],
  }),
  cacheRam: setting({
    flag: "cache-ram",
    env: "MODELHOST_CACHE_RAM",
    default: "8192",
    description:
      "Host memory, in MiB, for the prompt cache beyond the sequences, as llama-server's --cache-ram (same default): a sequence given to another conversation keeps its KV state here, and a prompt that starts the same way (the conversation's next turn, a shared system prompt) is restored from it instead of decoded; least recently used out first. 0: off.",
    schema: integer(0),
    commands: ["serve"],
  }),
  upstreams: setting({
    flag: "upstreams",
    env: "MODELHOST_UPSTREAMS",
    default: "",
    description:
      'A JSON file of models served by upstream OpenAI-compatible servers (modelhost workers, llama-server, vLLM, SGLang…): {"models": {"NAME": {"model": "their name", "endpoints": [{"url": "http://host:port/v1", "key": "…", "weight": 1, "maxConcurrent": 64}]}}}. Their models are listed and served beside the local ones, each conversation kept on the endpoint that holds its prompt cache (docs/deploy.md). Empty: none.',
    schema: z.string().trim(),
    commands: ["serve"],
  }),
  upstreamHealthInterval: setting({
    flag: "upstream-health-interval",
    env: "MODELHOST_UPSTREAM_HEALTH_INTERVAL",
    default: "10s",
    description:
      'How often each upstream endpoint\'s GET /models is checked: one that fails is taken out of its pool, one that answers again is put back. "0": no active checks (failed requests still take an endpoint out).',
    schema: optionalTimeout,
    commands: ["serve"],
  }),
  upstreamConnectTimeout: setting({
    flag: "upstream-connect-timeout",
    env: "MODELHOST_UPSTREAM_CONNECT_TIMEOUT",
    default: "5s",
    description: "How long a new connection to an upstream endpoint may take; then the request goes to another endpoint.",
    schema: timeout,
    commands: ["serve"],
  }),
  upstreamFirstByteTimeout: setting({
    flag: "upstream-first-byte-timeout",
    env: "MODELHOST_UPSTREAM_FIRST_BYTE_TIMEOUT",
    default: "60s",
    description:
      "How long an upstream endpoint may take to its first streamed chunk (its prompt read); then the request goes to another endpoint.",
    schema: timeout,
    commands: ["serve"],
  }),
  upstreamIdleTimeout: setting({
    flag: "upstream-idle-timeout",
    env: "MODELHOST_UPSTREAM_IDLE_TIMEOUT",
    default: "30s",
    description: "How long an upstream's stream may go without a chunk; then it ends with the protocol's error event.",
    schema: timeout,
    commands: ["serve"],
  }),
  maxImages: setting({
    flag: "max-images",
    env: "MODELHOST_MAX_IMAGES",
    default: "8",
    description:
      "The most images one request may show a vision model, across its messages; more get 400. Each costs the model its image tokens (576 for LLaVA 1.5, 256 for Gemma 3) and an encode.",
    schema: integer(0, 1000),
    commands: ["serve"],
  }),
  maxImageBytes: setting({
    flag: "max-image-bytes",
    env: "MODELHOST_MAX_IMAGE_BYTES",
    default: "10mb",
    description:
      "Largest image accepted, encoded (base64 images count their decoded bytes; the request body must fit --body-limit too). llama-server's limit for images it downloads.",
    schema: byteSize,
    commands: ["serve"],
  }),
  maxImagePixels: setting({
    flag: "max-image-pixels",
    env: "MODELHOST_MAX_IMAGE_PIXELS",
    default: "16777216",
    description:
      "Most pixels an image may declare (width × height in its header, checked before any decoding: a small file that declares a huge image is refused, not decoded). The default, 4096 × 4096, decodes to 48 MiB of RGB; projectors scale every image to a few hundred pixels a side.",
    schema: integer(1),
    commands: ["serve"],
  }),
  imageUrls: setting({
    flag: "image-urls",
    env: "MODELHOST_IMAGE_URLS",
    default: "false",
    description:
      "Fetch images that requests give by http(s) URL. Off: only data: URLs and base64 are taken, since the server would fetch whatever address a client names (its own network included).",
    schema: boolean,
    commands: ["serve"],
  }),
  imageUrlTimeout: setting({
    flag: "image-url-timeout",
    env: "MODELHOST_IMAGE_URL_TIMEOUT",
    default: "10s",
    description: "With --image-urls, the longest fetching one image may take (llama-server's limit).",
    schema: timeout,
    commands: ["serve"],
  }),
  shutdownGrace: setting({
    flag: "shutdown-grace",
    env: "MODELHOST_SHUTDOWN_GRACE",
    default: "25s",
    description:
      "On SIGTERM or SIGINT, how long requests in flight may take to finish; then the remaining streams end with an error event and the server exits. Below Kubernetes' default 30s termination grace, which leaves time to flush the usage ledger. A second signal exits at once.",
    schema: optionalTimeout,
    commands: ["serve"],
  }),
  metricsToken: setting({
    flag: "metrics-token",
    env: "MODELHOST_METRICS_TOKEN",
    default: "",
    description:
      "Bearer token GET /metrics requires (Prometheus: `authorization: {credentials: …}`). Empty: /metrics is open in the local profile and not served at all in the hosted one, whose tokens are the users'. Prefer the variable: a flag shows in process listings.",
    schema: z.string().trim(),
    commands: ["serve"],
  }),
  logLevel: setting({
    flag: "log-level",
    env: "MODELHOST_LOG_LEVEL",
    default: "info",
    description: "Log level: fatal, error, warn, info, debug, trace or silent.",
    schema: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
    commands: ["serve"],
  }),
  logFormat: setting({
    flag: "log-format",
    env: "MODELHOST_LOG_FORMAT",
    default: "auto",
    description:
      "Log format: pretty (one short line per request, for a person), json (one JSON object per line, for a log collector), or auto: pretty when stdout is a terminal, else json.",
    schema: z.enum(["auto", "pretty", "json"]),
    commands: ["serve"],
  }),
} as const;

export type SettingKey = keyof typeof settings;

type SettingValue<S> = S extends Setting<infer T> ? T : never;

export type Config = { -readonly [K in SettingKey]: SettingValue<(typeof settings)[K]> };
