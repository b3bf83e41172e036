import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { isServerError } from "../../src/core/ServerError.js";
import { pullModel, type PullOptions } from "../../src/models/pullModel.js";
import { assertPullUrl, checkingRedirects, pullTransport } from "../../src/models/pullTransport.js";
import { testModelPath } from "../support/testModels.js";

// Pulls go over https only (issue 28, finding 3): a plain http:// URL, or an https one that
// redirects to http://, is refused unless the operator allows plain http.

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string; param?: string }> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isServerError(error)) throw new Error(`expected a ServerError, got ${String(error)}`);
  return { code: error.code, message: error.message, ...(error.param === undefined ? {} : { param: error.param }) };
}

describe("which addresses a pull may fetch", () => {
  it("allows https always, plain http only when the operator says so or the hub is itself http", () => {
    expect(pullTransport("https://huggingface.co", false)).toEqual({ allowHttp: false });
    expect(pullTransport("https://huggingface.co", undefined)).toEqual({ allowHttp: false });
    expect(pullTransport("https://huggingface.co", true)).toEqual({ allowHttp: true });
    expect(pullTransport("http://mirror.lan:8080", false)).toEqual({ allowHttp: true });

    const strict = { allowHttp: false };
    expect(() => assertPullUrl(new URL("https://example.com/m.gguf"), strict)).not.toThrow();
    expect(() => assertPullUrl(new URL("http://example.com/m.gguf"), strict)).toThrow(
      /--allow-http-pull true \(MODELHOST_ALLOW_HTTP_PULL=true\)/,
    );
    expect(() => assertPullUrl(new URL("http://example.com/m.gguf"), { allowHttp: true })).not.toThrow();
    expect(() => assertPullUrl(new URL("ftp://example.com/m.gguf"), { allowHttp: true })).toThrow(/https only, not ftp:/);
    expect(() => assertPullUrl(new URL("file:///etc/passwd"), { allowHttp: true })).toThrow(/https only, not file:/);
  });

  it("checks each redirect before following it, and before handing it to a caller that follows them itself", async () => {
    const seen: string[] = [];
    const hops: Record<string, string> = {
      "https://a.test/1": "https://b.test/2",
      "https://b.test/2": "http://c.test/3",
      "https://b.test/ok": "/final",
    };
    const inner: typeof fetch = async (input, init) => {
      const url = String(input);
      seen.push(`${url} ${init?.redirect}`);
      const location = hops[url];
      return location === undefined ? new Response("bytes") : new Response(null, { status: 302, headers: { location } });
    };
    const strict = checkingRedirects(inner, { allowHttp: false });
    expect(await failure(strict("https://a.test/1"))).toEqual({
      code: "invalid_request",
      param: "model",
      message:
        "https://b.test/2 redirects to http://c.test; models are pulled over https only: a file fetched over plain http:// can be altered on the way. Use an https:// URL, or allow plain http with --allow-http-pull true (MODELHOST_ALLOW_HTTP_PULL=true).",
    });
    // Every request was made with redirect: "manual", and http://c.test was never asked.
    expect(seen).toEqual(["https://a.test/1 manual", "https://b.test/2 manual"]);

    seen.length = 0;
    expect(await (await strict("https://b.test/ok")).text()).toBe("bytes");
    expect(seen).toEqual(["https://b.test/ok manual", "https://b.test/final manual"]);

    seen.length = 0;
    const manual = await strict("https://a.test/1", { redirect: "manual" });
    expect(manual.status).toBe(302);
    await expect(strict("https://b.test/2", { redirect: "manual" })).rejects.toMatchObject({ code: "invalid_request" });

    const lenient = checkingRedirects(inner, { allowHttp: true });
    expect(await (await lenient("https://a.test/1")).text()).toBe("bytes");
  });
});

describe("pulling by URL", () => {
  let model: Buffer;
  let modelsDir: string;
  let certDir: string;
  /** A plain http server: the file, and how many requests reached it. */
  let plain: Server;
  let plainUrl: string;
  let plainRequests: string[];
  /** An https server (self-signed) that redirects /to-http/* to the plain server and serves /file/*. */
  let tls: Server;
  let tlsUrl: string;
  let previousTlsSetting: string | undefined;

  const serveFile = (request: IncomingMessage, response: ServerResponse) =>
    response.writeHead(200, { "content-length": model.length }).end(model);

  const pull = (reference: string, options: Partial<PullOptions> = {}) =>
    pullModel(reference, { modelsDir, hfEndpoint: "https://huggingface.co", retryDelayMs: 10, ...options });

  beforeAll(async () => {
    model = await readFile(await testModelPath("tiny"));
    certDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-tls-"));
    const [key, cert] = [path.join(certDir, "key.pem"), path.join(certDir, "cert.pem")];
    await promisify(execFile)("openssl", [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
    ]);
    plain = createServer((request, response) => {
      plainRequests.push(request.url ?? "");
      serveFile(request, response);
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;
    tls = createTlsServer({ key: await readFile(key), cert: await readFile(cert) }, (request, response) => {
      const name = path.posix.basename(request.url ?? "");
      if (request.url?.startsWith("/to-http/")) return void response.writeHead(302, { location: `${plainUrl}/files/${name}` }).end();
      serveFile(request, response);
    });
    await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve));
    tlsUrl = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
    // The certificate is made here, for this test only: trust it in this (forked) test process.
    previousTlsSetting = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  });

  afterAll(async () => {
    if (previousTlsSetting === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = previousTlsSetting;
    await new Promise((resolve) => plain?.close(resolve));
    tls?.closeAllConnections();
    await new Promise((resolve) => tls?.close(resolve));
    await rm(certDir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    plainRequests = [];
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-pull-transport-"));
    return () => rm(modelsDir, { recursive: true, force: true });
  });

  it("refuses a plain http:// URL by default, asking nothing of the server and writing nothing", async () => {
    const error = await failure(pull(`${plainUrl}/any.gguf`));
    expect(error).toMatchObject({ code: "invalid_request", param: "model" });
    expect(error.message).toContain("allow plain http with --allow-http-pull true");
    expect(plainRequests).toEqual([]);
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it("pulls a plain http:// URL when allowed, or when the hub is itself http", async () => {
    expect(await pull(`${plainUrl}/any.gguf`, { allowHttp: true })).toMatchObject({ id: "any", downloadedBytes: model.length });
    expect(await pull(`${plainUrl}/other.gguf`, { hfEndpoint: plainUrl })).toMatchObject({ id: "other", downloadedBytes: model.length });
    expect(plainRequests).toEqual(["/any.gguf", "/other.gguf"]);
  });

  it("pulls over https, and refuses an https URL that redirects to http://, before the http request", async () => {
    expect(await pull(`${tlsUrl}/file/secure.gguf`)).toMatchObject({ id: "secure", downloadedBytes: model.length });

    const error = await failure(pull(`${tlsUrl}/to-http/downgraded.gguf`));
    expect(error).toMatchObject({ code: "invalid_request", param: "model" });
    expect(error.message).toBe(
      `${tlsUrl}/to-http/downgraded.gguf redirects to http://127.0.0.1:${new URL(plainUrl).port}; models are pulled over https only: a file fetched over plain http:// can be altered on the way. Use an https:// URL, or allow plain http with --allow-http-pull true (MODELHOST_ALLOW_HTTP_PULL=true).`,
    );
    expect(plainRequests).toEqual([]);
    expect((await readdir(modelsDir)).filter((name) => name.includes("downgraded"))).toEqual([]);

    // Allowed, the redirect is followed.
    expect(await pull(`${tlsUrl}/to-http/downgraded.gguf`, { allowHttp: true })).toMatchObject({
      id: "downgraded",
      downloadedBytes: model.length,
    });
    expect(plainRequests).toEqual(["/files/downgraded.gguf"]);
  });

  it("refuses a hub whose file list redirects to http://", async () => {
    // The hub's API answers every request with a redirect to plain http here.
    const error = await failure(pull("hf.co/test/Tiny-GGUF:Q4_K_M", { hfEndpoint: `${tlsUrl}/to-http` }));
    expect(error).toMatchObject({ code: "invalid_request", param: "model" });
    expect(error.message).toMatch(
      /^https:\/\/127\.0\.0\.1:\d+\/to-http\/api\/models\/test\/Tiny-GGUF\/tree\/main redirects to http:\/\/127\.0\.0\.1:\d+; models are pulled over https only/,
    );
    expect(plainRequests).toEqual([]);
  });
});
