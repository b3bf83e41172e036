// Issue 13: the CLI sets an account's playground password (from standard input here; the terminal
// prompt reads without echo) and prints one-time sign-in links, which the running server accepts.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needs } from "../support/debianPackages.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";

const bin = path.resolve(import.meta.dirname, "../../bin/modelhost.cjs");

describe("playground sign-in from the CLI", () => {
  let dataDir: string;
  let server: TestServer;

  /** Runs the built CLI on the test's data directory, with `input` as its standard input (not a terminal). */
  function modelhost(args: string[], input = ""): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [bin, ...args, "--data-dir", dataDir], { stdio: ["pipe", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (data: Buffer) => (stdout += data.toString()));
      child.stderr.on("data", (data: Buffer) => (stderr += data.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }

  /** Signs in as a page would: the pre-session CSRF token first, then the password. */
  async function signIn(account: string, password: string): Promise<number> {
    const session = await fetch(`${server.url}/playground/api/session`);
    const { csrf_token } = (await session.json()) as { csrf_token: string };
    const cookie = session.headers.getSetCookie()[0]!.split(";")[0]!;
    const response = await fetch(`${server.url}/playground/api/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie, "x-csrf-token": csrf_token },
      body: JSON.stringify({ account, password }),
    });
    return response.status;
  }

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-playground-cli-"));
    expect((await modelhost(["account", "create", "carol"])).code).toBe(0);
    server = await startTestServer({ models: {}, config: { profile: "hosted", dataDir, tiersFile: "" } });
  });
  afterAll(async () => {
    await server?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("sets a password read from standard input, which then signs in", async () => {
    const set = await modelhost(["account", "password", "carol", "--password-stdin"], "a long passphrase\n");
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/Password set for carol/);
    expect(set.stdout).not.toContain("passphrase");
    expect(await signIn("carol", "a long passphrase")).toBe(200);
    expect(await signIn("carol", "a long passphrase\n")).toBe(401);
  });

  it.skipIf(!needs("bsdutils"))("asks for the password twice at a terminal, without echoing it", async () => {
    // `script` runs the command in a pseudo-terminal; what we write is typed at it, what it shows comes back.
    const command = [process.execPath, bin, "account", "password", "carol", "--data-dir", dataDir].map((part) => `'${part}'`).join(" ");
    const terminal = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
    let shown = "";
    const waitFor = (text: string) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!shown.includes(text)) return;
          terminal.stdout.off("data", check);
          resolve();
        };
        terminal.stdout.on("data", (data: Buffer) => (shown += data.toString()));
        terminal.stdout.on("data", check);
        check();
      });
    const exited = new Promise<number | null>((resolve) => terminal.on("close", resolve));
    await waitFor("New password for carol: ");
    terminal.stdin.write("typed at a terminal\r");
    await waitFor("Again: ");
    terminal.stdin.write("typed at a terminal\r");
    expect(await exited).toBe(0);
    terminal.stdin.end();
    expect(shown).toMatch(/Password set for carol/);
    expect(shown).not.toContain("typed at a terminal");
    expect(await signIn("carol", "typed at a terminal")).toBe(200);
  });

  it("refuses a short password, a missing account, and a prompt without a terminal", async () => {
    const short = await modelhost(["account", "password", "carol", "--password-stdin"], "short\n");
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/8 to 1024 characters/);
    const nobody = await modelhost(["account", "password", "nobody", "--password-stdin"], "long enough password");
    expect(nobody.code).toBe(2);
    expect(nobody.stderr).toMatch(/No account "nobody"/);
    const noTerminal = await modelhost(["account", "password", "carol"], "long enough password");
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toMatch(/--password-stdin/);
    const set = await modelhost(["account", "password", "carol", "--password-stdin"], "a long passphrase");
    expect(set.code).toBe(0);
  });

  it("prints a one-time sign-in link on the server's public URL, alone on the last line", async () => {
    const printed = await modelhost(["account", "sign-in-link", "carol", "--public-url", `${server.url}/`]);
    expect(printed.code).toBe(0);
    const link = printed.stdout.trimEnd().split("\n").at(-1)!;
    expect(link).toMatch(new RegExp(`^${server.url}/playground/sign-in\\?link=mhl_[A-Za-z0-9_-]{43}$`));
    const opened = await fetch(link, { redirect: "manual" });
    expect(opened.status).toBe(303);
    expect(opened.headers.getSetCookie().some((cookie) => cookie.startsWith("modelhost_session=mhs_"))).toBe(true);
    expect((await fetch(link, { redirect: "manual" })).status).toBe(401);

    // Without --public-url: the hosted profile's default address.
    const local = await modelhost(["account", "sign-in-link", "carol"]);
    expect(local.stdout.trimEnd().split("\n").at(-1)).toMatch(/^http:\/\/127\.0\.0\.1:8080\/playground\/sign-in\?link=mhl_/);
  });
});
