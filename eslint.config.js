import js from "@eslint/js";
import tseslint from "typescript-eslint";

/**
 * The layering of src/: each folder ("room") and the rooms it may import. Anything not listed is
 * forbidden, so a wrong import fails `npm run lint` (and with it `npm test`). README.md, "Source
 * layout", describes the rooms. A new folder under src/ must be added here (lint says so).
 */
const LAYERS = {
  core: [], // types and helpers every room shares
  gguf: [], // GGUF reader/writer: a file format library, nothing of ours
  db: [], // SQLite/Postgres plumbing (open, migrate per component, transactions)
  config: ["core"],
  protocols: ["core"],
  access: ["core", "db"],
  storedResponses: ["core", "db"],
  models: ["core", "gguf"],
  testmodels: ["core", "gguf"],
  // Chat templates rendered as transformers does (@huggingface/jinja); not wired yet: the engine will import it (issue 31).
  chatTemplates: ["core"],
  // The registry finds model files on disk (listing, manifest, header check): models sits below engine.
  engine: ["core", "gguf", "models", "chatTemplates"],
  // An Engine over upstream inference servers (issue 34): it speaks their wire format (protocols), never llama.cpp.
  upstream: ["core", "protocols"],
  // Model management reaches http through core's ModelStore, never models/ itself.
  http: ["core", "protocols", "access", "storedResponses", "config"],
  cli: null, // composition roots: anything
};
/** Only the engine talks to llama.cpp. */
const LLAMA_ROOMS = ["engine"];

/** Relative specifiers that climb into `room` ("../x/…", "../../x/…"); no subfolder shares a room's name. */
const climbsInto = (room) => `^(\\.\\./)+${room}(/|$)`;

function layerRules(room, allowed) {
  const forbidden = allowed === null ? [] : Object.keys(LAYERS).filter((other) => other !== room && !allowed.includes(other));
  const llama = !LLAMA_ROOMS.includes(room);
  const allowedText = allowed === null ? "anything" : allowed.length === 0 ? "nothing of ours" : allowed.join(", ");
  const message = (what) => `src/${room} may import ${allowedText}, not ${what} (layering in eslint.config.js).`;
  const patterns = [
    ...forbidden.map((other) => ({ regex: climbsInto(other), message: message(`src/${other}`) })),
    ...(llama
      ? [{ regex: "^node-llama-cpp(/|$)", message: `node-llama-cpp belongs to src/engine; src/${room} goes through core's Engine.` }]
      : []),
  ];
  // no-restricted-imports sees import and export-from; lazy import("…") is caught by the selector.
  const lazy = patterns.map(({ regex, message }) => ({
    selector: `ImportExpression[source.value=/${regex.replaceAll("/", "\\x2F")}/]`,
    message,
  }));
  return {
    files: [`src/${room}/**`],
    rules: patterns.length === 0 ? {} : { "no-restricted-imports": ["error", { patterns }], "no-restricted-syntax": ["error", ...lazy] },
  };
}

export default tseslint.config(
  { ignores: ["dist/", "web/dist/", "node_modules/", ".cache/", "coverage/", "scratch/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: "readonly", console: "readonly", URL: "readonly", setTimeout: "readonly", clearTimeout: "readonly" },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      eqeqeq: ["error", "always", { null: "ignore" }],
    },
  },
  ...Object.entries(LAYERS).map(([room, allowed]) => layerRules(room, allowed)),
  {
    files: ["src/**"],
    ignores: Object.keys(LAYERS).map((room) => `src/${room}/**`),
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "Program", message: "Every file under src/ belongs to a room of LAYERS in eslint.config.js: add its folder there." },
      ],
    },
  },
  {
    // The sample agent's page script runs in the browser.
    files: ["examples/*/public/**/*.js"],
    languageOptions: { globals: { document: "readonly", EventSource: "readonly" } },
  },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: { require: "readonly", __dirname: "readonly", module: "writable" } },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
);
