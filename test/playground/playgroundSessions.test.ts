// Issue 13, server side, hosted profile: signing in to the playground (password, one-time link),
// sessions kept in the access store (SQLite and PostgreSQL) and honoured by a second server, their
// cookie, idle timeout and maximum age, CSRF, failed sign-in limits, tokens managed from a session,
// and chat through a session, over HTTP against real servers (on a fake engine: nothing here
// depends on the model).
import path from "node:path";
import Database from "better-sqlite3";
import OpenAI from "openai";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AccessService } from "../../src/access/AccessService.js";
import type { SignInService } from "../../src/access/SignInService.js";
import { DATABASE_FILE } from "../../src/cli/openAccess.js";
import { needs } from "../support/debianPackages.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startPostgres, type TestPostgres } from "../support/startPostgres.js";
import type { TestServer } from "../support/startTestServer.js";

const HOUR = 3_600_000;
const MINUTE = 60_000;
const messages = [{ role: "user" as const, content: "Hello there." }];
const tiers = { default: "free", tiers: { free: { requestsPerMinute: 1000, tokensPerDay: 1_000_000 } } };

interface SessionBody {
  profile: string;
  signed_in: boolean;
  account?: { name: string; tier: string };
  csrf_token?: string;
}

/**
 * A browser, as far as the server can tell: it keeps the cookies the server sets (by name, as one
 * path holds them all), sends them back, and sends the CSRF token it was last given.
 */
class Browser {
  readonly cookies = new Map<string, string>();
  csrf = "";
  /** Every Set-Cookie header received, for the attribute checks. */
  readonly setCookies: string[] = [];

  constructor(
    public server: TestServer,
    readonly headers: Record<string, string> = {},
  ) {}

  async fetch(
    method: string,
    url: string,
    options: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal; redirect?: "follow" | "manual" } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers };
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    if (this.csrf && method !== "GET") headers["x-csrf-token"] = this.csrf;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${this.server.url}${url}`, {
      method,
      headers: { ...headers, ...options.headers },
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      redirect: options.redirect ?? "follow",
    });
    for (const line of response.headers.getSetCookie()) {
      this.setCookies.push(line);
      const [pair = ""] = line.split(";");
      const [name = "", value = ""] = pair.split("=");
      if (value === "" || /max-age=0\b|expires=thu, 01 jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }

  async session(): Promise<SessionBody> {
    const body = (await (await this.fetch("GET", "/playground/api/session")).json()) as SessionBody;
    this.csrf = body.csrf_token ?? "";
    return body;
  }

  /** GET session (for the pre-session CSRF token), then sign in; returns the response. */
  async signIn(account: string, password: string, headers: Record<string, string> = {}): Promise<Response> {
    if (!this.csrf) await this.session();
    const response = await this.fetch("POST", "/playground/api/sign-in", { body: { account, password }, headers });
    if (response.ok) this.csrf = ((await response.clone().json()) as { csrf_token: string }).csrf_token;
    return response;
  }
}

async function errorOf(response: Response): Promise<{ code: string | null; message: string }> {
  return ((await response.json()) as { error: { code: string | null; message: string } }).error;
}

function playgroundSuite(kind: "SQLite" | "PostgreSQL") {
  let hosted: Hosted;
  let postgres: TestPostgres | undefined;
  let accounts: AccessService;
  let signIns: SignInService;
  /** Both servers' clock (and the services' here): moved by the expiry tests. */
  let clock = Date.now();
  const now = () => clock;
  /** Trusts 127.0.0.1 as a proxy (X-Forwarded-For, -Proto); `other` shares its store and trusts none. */
  let server: TestServer;
  let other: TestServer;
  let users = 0;
  /** Each proxied client its own address, so failed sign-ins of one test do not count in another. */
  let addresses = 0;
  const viaProxy = () => ({ "x-forwarded-for": `10.0.0.${++addresses}` });

  /** A new account with a password. */
  const newUser = async () => {
    const name = `user-${++users}`;
    await accounts.createAccount(name);
    await signIns.setPassword(name, `correct horse ${users}`);
    return { name, password: `correct horse ${users}` };
  };
  const signedIn = async (on = server) => {
    const user = await newUser();
    const browser = new Browser(on, viaProxy());
    expect((await browser.signIn(user.name, user.password)).status).toBe(200);
    return { browser, user };
  };
  const slots = async () => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as {
      loaded: Array<{ id: string; active: number; queued: number }>;
    };
    const model = health.loaded.find((entry) => entry.id === "tiny");
    return { active: model?.active ?? 0, queued: model?.queued ?? 0 };
  };

  beforeAll(async () => {
    const databaseUrl = kind === "PostgreSQL" ? (postgres = await startPostgres()).url : "";
    hosted = await openHosted({ tiers, databaseUrl, now, sessions: { idleMs: 12 * HOUR, maxAgeMs: 7 * 24 * HOUR } });
    ({ accounts, signIns } = hosted);
    // A long reply at a token every 5 ms: a stream stays open until its client leaves.
    const engine = () => new FakeEngine({ models: ["tiny"], reply: { text: "word ".repeat(2000), tokenMs: 5 } });
    server = await hosted.serve({ engine: engine(), config: { parallel: 2, trustProxy: ["127.0.0.1"] } });
    other = await hosted.serve({ engine: engine(), config: { parallel: 2 } });
  }, 120_000);
  afterAll(async () => {
    await hosted?.close();
    await postgres?.stop();
  });

  it("signs in with a password, says who is signed in, and signs out on every replica", async () => {
    const user = await newUser();
    const browser = new Browser(server, viaProxy());
    expect(await browser.session()).toEqual({
      profile: "hosted",
      signed_in: false,
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });

    const wrong = await browser.signIn(user.name, "not the password");
    expect(wrong.status).toBe(401);
    const wrongError = await errorOf(wrong);
    expect(wrongError.code).toBe("sign_in_failed");
    const unknown = await browser.signIn("nobody-here", user.password);
    expect(unknown.status).toBe(401);
    // The same answer for a wrong password and an unknown account: it tells no one which accounts exist.
    expect(await errorOf(unknown)).toEqual(wrongError);
    expect(browser.cookies.has("modelhost_session")).toBe(false);

    const right = await browser.signIn(user.name, user.password);
    expect(right.status).toBe(200);
    const body = (await right.json()) as { account: { name: string; tier: string }; csrf_token: string };
    expect(body.account).toEqual({ name: user.name, tier: "free" });
    expect(browser.cookies.get("modelhost_session")).toMatch(/^mhs_/);
    expect(browser.cookies.has("modelhost_presession")).toBe(false);
    expect(await browser.session()).toEqual({
      profile: "hosted",
      signed_in: true,
      account: { name: user.name, tier: "free" },
      csrf_token: body.csrf_token,
    });

    // The other server shares the store: the same cookie is the same session there.
    const elsewhere = new Browser(other);
    for (const [name, value] of browser.cookies) elsewhere.cookies.set(name, value);
    expect((await elsewhere.session()).account?.name).toBe(user.name);
    expect((await elsewhere.fetch("GET", "/playground/api/models")).status).toBe(200);

    // Signing out there ends it here too; the old cookie, replayed, gives nothing.
    const stolen = browser.cookies.get("modelhost_session")!;
    const out = await elsewhere.fetch("POST", "/playground/api/sign-out");
    expect(out.status).toBe(204);
    expect(elsewhere.cookies.has("modelhost_session")).toBe(false);
    const replayed = await fetch(`${server.url}/playground/api/models`, { headers: { cookie: `modelhost_session=${stolen}` } });
    expect(replayed.status).toBe(401);
    expect((await errorOf(replayed)).code).toBe("not_signed_in");
    expect((await browser.session()).signed_in).toBe(false);
  });

  it("ends an account's sessions when it gets a new password", async () => {
    const { browser, user } = await signedIn();
    const { browser: elsewhere } = await signedIn(other);
    await signIns.setPassword(user.name, "a brand new password");
    const ended = await browser.fetch("GET", "/playground/api/models");
    expect(ended.status).toBe(401);
    expect((await errorOf(ended)).code).toBe("not_signed_in");
    // Another account's session is untouched; the old password no longer signs in, the new one does.
    expect((await elsewhere.fetch("GET", "/playground/api/models")).status).toBe(200);
    expect((await new Browser(server, viaProxy()).signIn(user.name, user.password)).status).toBe(401);
    expect((await new Browser(server, viaProxy()).signIn(user.name, "a brand new password")).status).toBe(200);
  });

  it("keeps only a hash of the session secret in the store", async () => {
    const { browser } = await signedIn();
    const secret = browser.cookies.get("modelhost_session")!;
    const rows =
      kind === "PostgreSQL"
        ? await pgRows(postgres!.url, "SELECT * FROM sessions")
        : sqliteRows(path.join(hosted.dataDir, DATABASE_FILE), "SELECT * FROM sessions");
    expect(rows.length).toBeGreaterThan(0);
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(secret);
    expect(dump).not.toContain(secret.slice(4));
  });

  it("sets the cookie HttpOnly, SameSite=Lax, Path=/playground, Secure only over https from a trusted proxy", async () => {
    const attributes = async (on: TestServer, headers: Record<string, string>) => {
      const user = await newUser();
      const browser = new Browser(on, { ...viaProxy(), ...headers });
      expect((await browser.signIn(user.name, user.password)).status).toBe(200);
      const line = browser.setCookies.find((cookie) => cookie.startsWith("modelhost_session="))!;
      return line
        .split(";")
        .slice(1)
        .map((part) => part.trim().toLowerCase());
    };
    const plain = await attributes(server, {});
    expect(plain).toEqual(expect.arrayContaining(["httponly", "samesite=lax", "path=/playground", `max-age=${7 * 24 * 3600}`]));
    expect(plain).not.toContain("secure");
    // The trusted proxy says the browser came over https: Secure (and the Origin to match is https).
    const host = new URL(server.url).host;
    expect(await attributes(server, { "x-forwarded-proto": "https", origin: `https://${host}` })).toContain("secure");
    // The other server trusts no proxy: the header is anyone's claim, and is ignored.
    expect(await attributes(other, { "x-forwarded-proto": "https" })).not.toContain("secure");
  });

  it("ends a session idle for --session-idle-timeout, and any session at --session-max-age", async () => {
    const { browser } = await signedIn();
    const models = async () => (await browser.fetch("GET", "/playground/api/models")).status;
    clock += 12 * HOUR - MINUTE;
    expect(await models()).toBe(200);
    // Each use starts the idle time again.
    clock += 12 * HOUR - MINUTE;
    expect(await models()).toBe(200);
    clock += 12 * HOUR;
    expect(await models()).toBe(401);

    const { browser: busy } = await signedIn();
    const started = clock;
    // Used every 6 hours, so never idle: the maximum age ends it all the same.
    while (clock + 6 * HOUR < started + 7 * 24 * HOUR) {
      clock += 6 * HOUR;
      expect((await busy.fetch("GET", "/playground/api/models")).status).toBe(200);
    }
    clock = started + 7 * 24 * HOUR;
    const ended = await busy.fetch("GET", "/playground/api/models");
    expect(ended.status).toBe(401);
    expect((await errorOf(ended)).code).toBe("not_signed_in");
  });

  it("signs in with a one-time link: once, and for 15 minutes", async () => {
    const user = await newUser();
    const { secret } = await signIns.createSignInLink(user.name);
    const browser = new Browser(server);
    const opened = await browser.fetch("GET", `/playground/sign-in?link=${secret}`, { redirect: "manual" });
    expect(opened.status).toBe(303);
    expect(opened.headers.get("location")).toBe("/playground/");
    expect(opened.headers.get("referrer-policy")).toBe("no-referrer");
    expect((await browser.session()).account?.name).toBe(user.name);

    const again = await new Browser(server).fetch("GET", `/playground/sign-in?link=${secret}`, { redirect: "manual" });
    expect(again.status).toBe(401);
    expect(again.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await again.text()).toMatch(/used already, has expired/);

    const late = await signIns.createSignInLink(user.name);
    clock += 15 * MINUTE;
    expect((await new Browser(server).fetch("GET", `/playground/sign-in?link=${late.secret}`, { redirect: "manual" })).status).toBe(401);
    const fresh = await signIns.createSignInLink(user.name);
    clock += 15 * MINUTE - 1000;
    expect((await new Browser(other).fetch("GET", `/playground/sign-in?link=${fresh.secret}`, { redirect: "manual" })).status).toBe(303);

    // Opened twice at once, on both servers: exactly one signs in.
    const raced = await signIns.createSignInLink(user.name);
    const open = (on: TestServer) => new Browser(on).fetch("GET", `/playground/sign-in?link=${raced.secret}`, { redirect: "manual" });
    const statuses = (await Promise.all([open(server), open(other), open(server), open(other)])).map((response) => response.status);
    expect(statuses.sort()).toEqual([303, 401, 401, 401]);

    expect((await new Browser(server).fetch("GET", "/playground/sign-in?link=mhl_made-up", { redirect: "manual" })).status).toBe(401);
    expect((await new Browser(server).fetch("GET", "/playground/sign-in", { redirect: "manual" })).status).toBe(400);
  });

  it("refuses state-changing requests without the CSRF proof or from another origin", async () => {
    const { browser } = await signedIn();
    const chat = (headers: Record<string, string>) =>
      browser.fetch("POST", "/playground/api/chat/completions", { body: { model: "tiny", messages, max_tokens: 1 }, headers });
    const good = browser.csrf;
    // A foreign origin is refused before the CSRF check, on every method (browserGuard.ts).
    const cases: Array<[string, Record<string, string>, string]> = [
      ["no header", { "x-csrf-token": "" }, "csrf_rejected"],
      ["wrong token", { "x-csrf-token": good.slice(0, -1) + (good.endsWith("A") ? "B" : "A") }, "csrf_rejected"],
      ["foreign origin", { origin: "https://evil.example" }, "origin_not_allowed"],
    ];
    for (const [what, headers, code] of cases) {
      const response = await chat(headers);
      expect(response.status, what).toBe(403);
      expect((await errorOf(response)).code, what).toBe(code);
    }
    const read = await browser.fetch("GET", "/playground/api/tokens", { headers: { origin: "https://evil.example" } });
    expect(read.status).toBe(403);
    expect((await errorOf(read)).code).toBe("origin_not_allowed");
    const revoke = await browser.fetch("DELETE", "/playground/api/tokens/tok_x", { headers: { "x-csrf-token": "" } });
    expect(revoke.status).toBe(403);
    expect((await chat({ origin: server.url })).status).toBe(200);

    // Sign-in needs the token of this browser's own pre-session cookie, from this origin.
    const user = await newUser();
    const fresh = new Browser(server, viaProxy());
    await fresh.session();
    const attacker = new Browser(server, viaProxy());
    await attacker.session();
    const signIn = (headers: Record<string, string>) =>
      fresh.fetch("POST", "/playground/api/sign-in", { body: { account: user.name, password: user.password }, headers });
    expect((await signIn({ "x-csrf-token": "" })).status).toBe(403);
    expect((await signIn({ "x-csrf-token": attacker.csrf })).status).toBe(403);
    expect((await signIn({ origin: "https://evil.example" })).status).toBe(403);
    expect((await signIn({})).status).toBe(200);
  });

  it("limits failed sign-ins per account and per address", async () => {
    const user = await newUser();
    for (let attempt = 0; attempt < 5; attempt++) {
      const response = await new Browser(server, viaProxy()).signIn(user.name, `wrong ${attempt}`);
      expect(response.status).toBe(401);
    }
    // Now even the right password waits, from any address.
    const locked = await new Browser(server, viaProxy()).signIn(user.name, user.password);
    expect(locked.status).toBe(429);
    expect((await errorOf(locked)).code).toBe("rate_limit_exceeded");
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(14 * 60);
    expect(Number(locked.headers.get("retry-after"))).toBeLessThanOrEqual(15 * 60);
    clock += 15 * MINUTE;
    expect((await new Browser(server, viaProxy()).signIn(user.name, user.password)).status).toBe(200);

    // One address trying many accounts: 20 failures, then refused even for a right password.
    const address = { "x-forwarded-for": "10.9.9.9" };
    for (let attempt = 0; attempt < 20; attempt++) {
      expect((await new Browser(server, address).signIn(`guess-${attempt}`, "123456")).status).toBe(401);
    }
    const other1 = await newUser();
    expect((await new Browser(server, address).signIn(other1.name, other1.password)).status).toBe(429);
    expect((await new Browser(server, viaProxy()).signIn(other1.name, other1.password)).status).toBe(200);
    clock += 15 * MINUTE;
  });

  it("counts a sign-in before checking it: of 20 wrong passwords at once, on both servers, 5 are checked", async () => {
    const user = await newUser();
    // Each from an address of its own (`other` trusts no proxy: 127.0.0.1 for its ten), so the account's limit is the one met.
    const browsers = Array.from({ length: 20 }, (_, index) => new Browser(index % 2 === 0 ? server : other, viaProxy()));
    await Promise.all(browsers.map((browser) => browser.session()));
    const responses = await Promise.all(browsers.map((browser, index) => browser.signIn(user.name, `wrong ${index}`)));
    expect(responses.map((response) => response.status).sort()).toEqual([...Array<number>(5).fill(401), ...Array<number>(15).fill(429)]);
    for (const response of responses.filter((each) => each.status === 429)) {
      expect((await errorOf(response)).code).toBe("rate_limit_exceeded");
      expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(14 * 60);
    }
    // The five checked were failures: the right password waits now too.
    expect((await new Browser(server, viaProxy()).signIn(user.name, user.password)).status).toBe(429);
    clock += 15 * MINUTE;
  });

  it("does not count sign-ins that succeed", async () => {
    const user = await newUser();
    for (let attempt = 0; attempt < 8; attempt++) {
      expect((await new Browser(attempt % 2 === 0 ? server : other, viaProxy()).signIn(user.name, user.password)).status).toBe(200);
    }
    const responses = await Promise.all(Array.from({ length: 4 }, () => new Browser(server, viaProxy()).signIn(user.name, user.password)));
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200]);
  });

  it("creates, lists and revokes the account's own tokens; a created token works with the openai client until revoked", async () => {
    const { browser } = await signedIn();
    const { browser: stranger } = await signedIn();
    const nowSeconds = Math.floor(clock / 1000);
    const created = await browser.fetch("POST", "/playground/api/tokens", {
      body: { name: "laptop", expires_at: nowSeconds + 7 * 86_400 },
    });
    expect(created.status).toBe(201);
    const token = (await created.json()) as {
      token: string;
      id: string;
      name: string;
      prefix: string;
      created_at: number;
      expires_at: number;
    };
    expect(token).toMatchObject({
      name: "laptop",
      expires_at: nowSeconds + 7 * 86_400,
      token: expect.stringMatching(/^mh_[A-Za-z0-9]{38}$/),
    });
    expect(token.token.startsWith(token.prefix)).toBe(true);
    const never = await browser.fetch("POST", "/playground/api/tokens", { body: { name: "server", expires_at: null } });
    expect(((await never.json()) as { expires_at: number | null }).expires_at).toBeNull();

    const list = (await (await browser.fetch("GET", "/playground/api/tokens")).json()) as { data: Array<Record<string, unknown>> };
    expect(list.data.map((item) => item.name)).toEqual(["server", "laptop"]);
    expect(list.data[1]).toEqual({
      id: token.id,
      name: "laptop",
      prefix: token.prefix,
      created_at: token.created_at,
      last_used_at: null,
      expires_at: token.expires_at,
      revoked_at: null,
    });
    expect(JSON.stringify(list)).not.toContain(token.token);
    expect(((await (await stranger.fetch("GET", "/playground/api/tokens")).json()) as { data: unknown[] }).data).toEqual([]);

    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: token.token, maxRetries: 0 });
    const reply = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 2 });
    expect(reply.choices[0]?.message.content).toBeTypeOf("string");

    const theirs = await stranger.fetch("DELETE", `/playground/api/tokens/${token.id}`);
    expect(theirs.status).toBe(404);
    expect((await client.chat.completions.create({ model: "tiny", messages, max_tokens: 1 })).choices).toHaveLength(1);
    const revoked = await browser.fetch("DELETE", `/playground/api/tokens/${token.id}`);
    expect(revoked.status).toBe(200);
    expect(((await revoked.json()) as { revoked_at: number | null }).revoked_at).toBeTypeOf("number");
    await expect(client.chat.completions.create({ model: "tiny", messages, max_tokens: 1 })).rejects.toMatchObject({ status: 401 });

    const past = await browser.fetch("POST", "/playground/api/tokens", { body: { name: "old", expires_at: nowSeconds - 60 } });
    expect(past.status).toBe(400);
    expect((await past.json()) as object).toMatchObject({ error: { param: "expires_at" } });
  });

  it("gives a session cookie nothing on /v1 and /api", async () => {
    const { browser } = await signedIn();
    for (const url of ["/v1/models", "/api/tags", "/v1/usage"]) {
      const response = await browser.fetch("GET", url);
      expect(response.status, url).toBe(401);
    }
  });

  it("gives a personal access token nothing on the playground's API", async () => {
    const user = await newUser();
    const { secret } = await accounts.createToken(user.name, { name: "cli", expiresAt: null });
    const bearer = { authorization: `Bearer ${secret}` };
    // The token works where tokens do...
    expect((await fetch(`${server.url}/v1/models`, { headers: bearer })).status).toBe(200);
    // ...and not on /playground/api, which takes only the session cookie.
    const asToken = (method: string, url: string, body?: unknown) =>
      fetch(`${server.url}${url}`, {
        method,
        headers: { ...bearer, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const calls: Array<[string, string, unknown?]> = [
      ["GET", "/playground/api/models"],
      ["GET", "/playground/api/tokens"],
      ["GET", "/playground/api/usage"],
      ["POST", "/playground/api/chat/completions", { model: "tiny", messages, max_tokens: 1 }],
      ["POST", "/playground/api/tokens", { name: "minted by a token", expires_at: null }],
    ];
    for (const [method, url, body] of calls) {
      const response = await asToken(method, url, body);
      expect(response.status, `${method} ${url}`).toBe(401);
      expect((await errorOf(response)).code, `${method} ${url}`).toBe("not_signed_in");
    }
    expect((await asToken("GET", "/playground/api/session").then((response) => response.json())) as SessionBody).toMatchObject({
      signed_in: false,
    });
    expect((await accounts.listTokens(user.name)).map((token) => token.name)).toEqual(["cli"]);
  });

  it("streams a chat through the session, counts it in the account's usage, and frees the slot on disconnect", async () => {
    const { browser } = await signedIn();
    const streamed = await browser.fetch("POST", "/playground/api/chat/completions", {
      body: { model: "tiny", messages, max_tokens: 3, stream: true, stream_options: { include_usage: true } },
    });
    expect(streamed.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(streamed.headers.get("x-ratelimit-limit-requests")).toBe("1000");
    const events = (await streamed.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const last = JSON.parse(events.at(-2)!.slice("data: ".length)) as { usage: { completion_tokens: number } };
    expect(last.usage.completion_tokens).toBe(3);

    const controller = new AbortController();
    const open = await browser.fetch("POST", "/playground/api/chat/completions", {
      body: { model: "tiny", messages, max_tokens: 100_000, stream: true },
      signal: controller.signal,
    });
    await open.body!.getReader().read();
    await expect.poll(slots).toMatchObject({ active: 1 });
    controller.abort();
    await expect.poll(slots).toEqual({ active: 0, queued: 0 });

    // Recorded when the ledger is flushed (in batches): polled. Both requests, under the playground's ledger id.
    const usage = async () => {
      const body = (await (await browser.fetch("GET", "/playground/api/usage")).json()) as {
        account: { name: string };
        data: Array<{ model: string; requests: number }>;
        limits: object;
      };
      return body.data.filter((row) => row.model === "tiny").reduce((sum, row) => sum + row.requests, 0);
    };
    await expect.poll(usage, { timeout: 10_000 }).toBe(2);
    const body = (await (await browser.fetch("GET", "/playground/api/usage")).json()) as { account: { name: string }; limits: object };
    expect(body.limits).toMatchObject({ requests_per_minute: { limit: 1000 } });
    const rows = await accounts.usage({ account: body.account.name });
    expect(rows.map((row) => row.tokenId)).toEqual(["playground"]);
  });
}

function sqliteRows(file: string, sql: string): unknown[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
}

async function pgRows(url: string, sql: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

describe("playground sign-in and sessions on SQLite", () => playgroundSuite("SQLite"));
describe.skipIf(!needs("postgresql"))("playground sign-in and sessions on PostgreSQL", () => playgroundSuite("PostgreSQL"));
