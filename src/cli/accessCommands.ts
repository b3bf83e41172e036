import { parseArgs } from "node:util";
import type { AccessToken, Account, UsageRow } from "../access/AccessStore.js";
import { AccessError } from "../access/AccessError.js";
import { AccessService, DEFAULT_TOKEN_EXPIRY } from "../access/AccessService.js";
import { SignInService } from "../access/SignInService.js";
import type { Config } from "../config/settings.js";
import { formatListing } from "./formatTable.js";
import { openStore, openTiers } from "./openAccess.js";
import { UsageError } from "./UsageError.js";

export const accessUsage = `Manage the hosted profile's accounts, personal access tokens and usage (same data directory or
database as the server, also while it runs):

  modelhost account create NAME [--tier T]
  modelhost account list [--json]
  modelhost account disable NAME        (its tokens stop working at once)
  modelhost account enable NAME
  modelhost account tier NAME TIER
  modelhost account password NAME [--password-stdin]
                                        (for the browser playground's sign-in; asked twice at the
                                        terminal without echo, or read from standard input)
  modelhost account sign-in-link NAME [--public-url URL]
                                        (prints a one-time playground sign-in link: 15 minutes, once)
  modelhost token create --account A [--name N] [--expires 7d|30d|60d|90d|YYYY-MM-DD|never]
                                        (default ${DEFAULT_TOKEN_EXPIRY}; prints the token once, alone on the last line)
  modelhost token list [--account A] [--json]   (prefix, name, dates; never the secret)
  modelhost token revoke ID|PREFIX
  modelhost usage [--account A] [--since YYYY-MM-DD] [--json]

--json prints the records as a JSON array, for scripts (times in milliseconds since the epoch).`;

/** Runs `account …`, `token …` or `usage …`; returns what to print. */
export async function accessCommand(
  command: "account" | "token" | "usage",
  args: string[],
  config: Config,
  input: PasswordInput = terminalInput,
): Promise<string> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      tier: { type: "string" },
      account: { type: "string" },
      name: { type: "string" },
      expires: { type: "string" },
      since: { type: "string" },
      json: { type: "boolean", default: false },
      "password-stdin": { type: "boolean", default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const tiers = await openTiers(config);
  const store = await openStore(config);
  const service = new AccessService(store, tiers);
  // Sessions are the server's: the CLI only sets passwords and issues links, so its policy is unused.
  const signIn = () => new SignInService(store, { idleMs: config.sessionIdleTimeout, maxAgeMs: config.sessionMaxAge });
  try {
    const [action, ...rest] = command === "usage" ? ["show"] : positionals;
    switch (`${command} ${action}`) {
      case "account create":
        return formatAccounts([await service.createAccount(required(rest[0], "NAME"), values.tier)]);
      case "account list":
        return formatAccounts(await service.listAccounts(), values.json);
      case "account disable":
        return formatAccounts([await service.disableAccount(required(rest[0], "NAME"))]);
      case "account enable":
        return formatAccounts([await service.enableAccount(required(rest[0], "NAME"))]);
      case "account tier":
        return formatAccounts([await service.setTier(required(rest[0], "NAME"), required(rest[1], "TIER"))]);
      case "account password": {
        const name = required(rest[0], "NAME");
        const password = values["password-stdin"] ? await input.readStdin() : await askTwice(input, name);
        const account = await signIn().setPassword(name, password);
        return `Password set for ${account.name}: sign in to the playground at /playground/.`;
      }
      case "account sign-in-link": {
        const { secret, expiresAt, account } = await signIn().createSignInLink(required(rest[0], "NAME"));
        const link = `${publicUrl(config)}/playground/sign-in?link=${secret}`;
        // The link alone on the last line, as a token's secret, for scripts.
        return [`One-time sign-in link for ${account.name}, valid until ${date(expiresAt)} UTC (15 minutes), once:`, link].join("\n");
      }
      case "token create": {
        const { secret, token } = await service.createToken(required(values.account, "--account"), {
          name: values.name,
          expires: values.expires,
        });
        // The secret is alone on the last line, so scripts can capture it with `tail -n 1`.
        return [formatTokens([token]), "", "Copy the token now: it is not stored and cannot be shown again.", secret].join("\n");
      }
      case "token list":
        return formatTokens(await service.listTokens(values.account), values.json);
      case "token revoke":
        return formatTokens([await service.revokeToken(required(rest[0], "ID or PREFIX"))]);
      case "usage show":
        return formatUsage(await service.usage({ account: values.account, since: values.since }), values.json);
      default:
        throw new UsageError(accessUsage);
    }
  } finally {
    await store.close();
  }
}

/** Where a password comes from: the terminal, without echo, or standard input (--password-stdin). */
export interface PasswordInput {
  /** Reads one line from the terminal without showing it; undefined when standard input is no terminal. */
  readHidden(prompt: string): Promise<string | undefined>;
  /** The whole of standard input, without its final line break. */
  readStdin(): Promise<string>;
}

async function askTwice(input: PasswordInput, name: string): Promise<string> {
  const first = await input.readHidden(`New password for ${name}: `);
  if (first === undefined) throw new UsageError("Standard input is not a terminal: pipe the password in with --password-stdin.");
  const second = await input.readHidden("Again: ");
  if (first !== second) throw new AccessError("password_invalid", "The two passwords differ; nothing was changed.");
  return first;
}

const terminalInput: PasswordInput = {
  async readHidden(prompt) {
    const stdin = process.stdin;
    if (!stdin.isTTY) return undefined;
    // Echo off before the prompt shows: what is typed after it must never reach the screen.
    stdin.setRawMode(true);
    process.stderr.write(prompt);
    stdin.resume();
    stdin.setEncoding("utf8");
    try {
      return await new Promise<string>((resolve, reject) => {
        let typed = "";
        const onData = (chunk: string) => {
          for (const char of chunk) {
            if (char === "\r" || char === "\n") {
              stdin.off("data", onData);
              return resolve(typed);
            }
            if (char === "\u0003") {
              stdin.off("data", onData);
              return reject(new UsageError("Cancelled."));
            }
            typed = char === "\u007f" || char === "\b" ? [...typed].slice(0, -1).join("") : typed + char;
          }
        };
        stdin.on("data", onData);
      });
    } finally {
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
    }
  },
  async readStdin() {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks)
      .toString("utf8")
      .replace(/\r?\n$/, "");
  },
};

/** Where browsers reach the server: --public-url, else the address it listens on. */
function publicUrl(config: Config): string {
  if (config.publicUrl) return config.publicUrl;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  // Sign-in links are for the hosted profile, whose port "auto" is 8080.
  return `http://${host}:${config.port === "auto" ? 8080 : config.port}`;
}

function required(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`Missing ${what}.\n\n${accessUsage}`);
  return value;
}

function date(ms: number | null): string {
  return ms === null ? "-" : new Date(ms).toISOString().replace("T", " ").slice(0, 16);
}

function formatAccounts(accounts: Account[], json = false): string {
  return formatListing(accounts, json, ["NAME", "ID", "TIER", "STATUS", "CREATED"], (a) => [
    a.name,
    a.id,
    a.tier,
    a.disabled ? "disabled" : "active",
    date(a.createdAt),
  ]);
}

function formatTokens(tokens: AccessToken[], json = false): string {
  const status = (t: AccessToken) =>
    t.revokedAt !== null ? "revoked" : t.expiresAt !== null && t.expiresAt <= Date.now() ? "expired" : "active";
  return formatListing(tokens, json, ["ID", "PREFIX", "NAME", "STATUS", "CREATED", "EXPIRES", "LAST USED"], (t) => [
    t.id,
    `${t.prefix}…`,
    t.name,
    status(t),
    date(t.createdAt),
    t.expiresAt === null ? "never" : date(t.expiresAt),
    date(t.lastUsedAt),
  ]);
}

function formatUsage(rows: UsageRow[], json: boolean): string {
  return formatListing(rows, json, ["DAY", "ACCOUNT", "MODEL", "TOKEN", "REQUESTS", "PROMPT", "COMPLETION"], (r) => [
    r.day,
    r.accountName,
    r.model,
    r.tokenId,
    String(r.requests),
    String(r.promptTokens),
    String(r.completionTokens),
  ]);
}
