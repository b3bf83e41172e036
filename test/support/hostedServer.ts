// The hosted profile's set-up, once: a data directory with the tiers file, the access store the
// server will open (SQLite there, or PostgreSQL), the operator's services on it (accounts and
// tokens, passwords), and servers on port 0 in front of it, on real models or a fake engine.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { AccessStore } from "../../src/access/AccessStore.js";
import { AccessService } from "../../src/access/AccessService.js";
import { SignInService } from "../../src/access/SignInService.js";
import { openStore, openTiers } from "../../src/cli/openAccess.js";
import { startTestServer, type TestServer, type TestServerOptions } from "./startTestServer.js";

export interface HostedOptions {
  /** Written to the data directory's tiers.json; absent, the built-in tiers (`--tiers-file ""`). */
  tiers?: object;
  /** PostgreSQL instead of SQLite in the data directory, for the access store (and the stored responses). */
  databaseUrl?: string;
  /** The clock of the test side's services (token and session expiry), as the servers' `now`. */
  now?: () => number;
  /** The playground's session lifetimes for the test side's sign-in service (default: an hour idle, a day at most). */
  sessions?: { idleMs: number; maxAgeMs: number };
}

export interface HostedAccount {
  name: string;
  id: string;
  /** A personal access token of the account. */
  token: string;
}

export interface Hosted {
  dataDir: string;
  /** The tiers file ("" with the built-in tiers): `--tiers-file` of servers spawned on this data. */
  tiersFile: string;
  databaseUrl: string;
  /** The access store the servers use, opened on the test's side. */
  store: AccessStore;
  /** The operator's accounts and tokens on that store, with the same tiers. */
  accounts: AccessService;
  signIns: SignInService;
  /**
   * A new account of `tier` (default: the default tier) and a token of it, so each test counts
   * against limits of its own. Named `<tier>-<n>` unless named; `password` lets it sign in to the playground.
   */
  newAccount(tier?: string, options?: { name?: string; password?: string }): Promise<HostedAccount>;
  /**
   * A hosted server on this data, on port 0: on `models` (llama.cpp) or `engine` (a fake one).
   * `config` adds to the hosted settings; it is closed by close().
   */
  serve(options: TestServerOptions): Promise<TestServer>;
  /** Closes the servers, then the store, and removes the data directory. */
  close(): Promise<void>;
}

export async function openHosted(options: HostedOptions = {}): Promise<Hosted> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-hosted-"));
  let tiersFile = "";
  if (options.tiers) {
    tiersFile = path.join(dataDir, "tiers.json");
    await writeFile(tiersFile, JSON.stringify(options.tiers));
  }
  const databaseUrl = options.databaseUrl ?? "";
  const store = await openStore({ dataDir, databaseUrl });
  const accounts = new AccessService(store, await openTiers({ tiersFile }), options.now);
  const signIns = new SignInService(store, options.sessions ?? { idleMs: 3_600_000, maxAgeMs: 86_400_000 }, options.now);
  const servers: TestServer[] = [];
  let created = 0;
  return {
    dataDir,
    tiersFile,
    databaseUrl,
    store,
    accounts,
    signIns,
    async newAccount(tier, { name = `${tier ?? "default"}-${++created}`, password } = {}) {
      const account = await accounts.createAccount(name, tier);
      if (password !== undefined) await signIns.setPassword(name, password);
      return { name, id: account.id, token: (await accounts.createToken(name, { name: "test" })).secret };
    },
    async serve(serverOptions) {
      const server = await startTestServer({
        now: options.now,
        ...serverOptions,
        config: { profile: "hosted", dataDir, tiersFile, databaseUrl, ...serverOptions.config },
      });
      servers.push(server);
      return server;
    },
    async close() {
      await Promise.all(servers.map((server) => server.close()));
      await store.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
