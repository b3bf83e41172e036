import type { Config } from "../config/settings.js";

/** The server's native error body, `{"error":"…"}`, as an exception with the HTTP status. */
export class ServerResponseError extends Error {
  override name = "ServerResponseError";
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** Liveness is answered at once by a running server; anything slower is not one. */
const probeTimeoutMs = 1_500;

/** The address the CLI's client commands (`ps`, `run`) talk to: the server's own --host and --port. */
export function serverUrl(config: Pick<Config, "host" | "port"> & Partial<Pick<Config, "profile">>): string {
  // A server listening on every address is reached on loopback.
  const host = config.host === "0.0.0.0" ? "127.0.0.1" : config.host === "::" ? "::1" : config.host;
  const port = config.port === "auto" ? (config.profile === "hosted" ? 8080 : 11434) : config.port;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** A small client of a running modelhost's native API (`/api/*`), for the CLI. */
export class ServerClient {
  constructor(readonly baseUrl: string) {}

  /** Whether a server answers at the address (its liveness probe, `GET /`). */
  async isRunning(): Promise<boolean> {
    try {
      const response = await fetch(this.baseUrl, { signal: AbortSignal.timeout(probeTimeoutMs) });
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }

  async get<T>(path: string): Promise<T> {
    const response = await this.#fetch(path, { method: "GET" });
    return (await response.json()) as T;
  }

  /**
   * POSTs a request whose answer streams as NDJSON, yielding each object. An `{"error"}` line
   * (an error after the stream began) is thrown, as an error status is.
   */
  async *stream(path: string, body: unknown, signal?: AbortSignal): AsyncGenerator<Record<string, unknown>> {
    const response = await this.#fetch(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
      signal: signal ?? null,
    });
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of response.body) {
      buffered += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (!line) continue;
        const object = JSON.parse(line) as Record<string, unknown>;
        if (typeof object.error === "string") throw new ServerResponseError(object.error, response.status);
        yield object;
      }
    }
  }

  async #fetch(path: string, init: RequestInit): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(new URL(path, this.baseUrl), init);
    } catch (error) {
      if (init.signal?.aborted) throw error;
      throw new ServerResponseError(`No modelhost server answers at ${this.baseUrl}. Start one with \`modelhost serve\`.`, 0);
    }
    if (response.ok) return response;
    const text = await response.text();
    let message = text;
    try {
      const body = JSON.parse(text) as { error?: string | { message?: string } };
      message = typeof body.error === "string" ? body.error : (body.error?.message ?? text);
    } catch {
      // not JSON: the text itself
    }
    throw new ServerResponseError(message || `HTTP ${response.status}`, response.status);
  }
}
