import { ServerError } from "../core/ServerError.js";

/**
 * Which addresses a pull may fetch from. Every pull goes over https: a plain http:// file can be
 * altered on the way, and a plain URL publishes no checksum that would notice. Plain http is allowed
 * only where the operator says so: `--allow-http-pull true`, or a `--hf-endpoint` that is itself
 * http:// (a mirror on the local network, a test's stand-in hub), which then applies to the files
 * it redirects to as well.
 */
export interface PullTransport {
  allowHttp: boolean;
}

const HTTP_PULL_SETTING = "--allow-http-pull true (MODELHOST_ALLOW_HTTP_PULL=true)";

/** The transport a pull from `hfEndpoint` has, `allowHttp` being the operator's setting. */
export function pullTransport(hfEndpoint: string, allowHttp: boolean | undefined): PullTransport {
  return { allowHttp: allowHttp === true || new URL(hfEndpoint).protocol === "http:" };
}

/** Refuses (400) a URL a pull may not fetch: anything but https, or http when it is not allowed. */
export function assertPullUrl(url: URL, transport: PullTransport, redirectedFrom?: URL): void {
  if (url.protocol === "https:" || (url.protocol === "http:" && transport.allowHttp)) return;
  const origin =
    redirectedFrom === undefined ? "" : `${redirectedFrom.origin}${redirectedFrom.pathname} redirects to ${url.protocol}//${url.host}; `;
  const message =
    url.protocol === "http:"
      ? `${origin}models are pulled over https only: a file fetched over plain http:// can be altered on the way. Use an https:// URL, or allow plain http with ${HTTP_PULL_SETTING}.`
      : `${origin}models are pulled over https only, not ${url.protocol}`;
  throw new ServerError("invalid_request", { param: "model", message });
}

const maxRedirects = 10;

/**
 * fetch with every redirect checked before it is followed, so an https address never leads a pull
 * to plain http (or to another scheme). A caller that follows redirects itself (`redirect:
 * "manual"`) gets each redirect once its target has been checked; otherwise they are followed here.
 */
export function checkingRedirects(inner: typeof fetch, transport: PullTransport): typeof fetch {
  return async (input, init) => {
    let url = new URL(input instanceof Request ? input.url : input);
    for (let hop = 0; hop <= maxRedirects; hop++) {
      const response = await inner(hop === 0 ? input : url, { ...init, redirect: "manual" });
      const location = response.headers.get("location");
      if (response.status < 300 || response.status >= 400 || location === null) return response;
      const next = new URL(location, url);
      try {
        assertPullUrl(next, transport, url);
      } catch (error) {
        await response.body?.cancel();
        throw error;
      }
      if (init?.redirect === "manual") return response;
      await response.body?.cancel();
      url = next;
    }
    throw new ServerError("download_failed", { message: `${url.origin}${url.pathname} redirects more than ${maxRedirects} times.` });
  };
}
