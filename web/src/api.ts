// The playground's calls to its server, all under /playground/api and all authenticated by the
// session cookie (hosted profile): the page never holds an API token, except the one it has just
// created, shown once. Every state-changing call carries the session's CSRF token in a header.

export const API_BASE = "/playground/api";

export interface Account {
  name: string;
  tier: string;
}

export interface Session {
  profile: "local" | "hosted";
  signed_in: boolean;
  account?: Account;
  csrf_token?: string;
}

export interface Model {
  id: string;
  owned_by?: string;
  /** Our extension of the OpenAI model object: "chat", "vision" (reads images), "embeddings", … */
  capabilities?: string[];
}

export interface TokenInfo {
  id: string;
  name: string;
  prefix: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
}

export interface CreatedToken {
  token: string;
  id: string;
  name: string;
  prefix: string;
  created_at: number;
  expires_at: number | null;
}

export interface LimitFigure {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

export interface UsageRow {
  date: string;
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
}

export interface Usage {
  account: Account;
  since: string;
  limits: { requests_per_minute?: LimitFigure; tokens_per_day?: LimitFigure };
  data: UsageRow[];
}

/** An error answer from the server, in the OpenAI shape `{error: {message, code}}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

let csrfToken: string | undefined;
/** Called when the server says the session is gone (401 on a call that needs it). */
let onSignedOut: () => void = () => {};

export function whenSignedOut(callback: () => void): void {
  onSignedOut = callback;
}

/** Sends a request; a non-2xx answer becomes an ApiError with the server's message. */
export async function send(method: "GET" | "POST" | "DELETE", path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && csrfToken) headers["x-csrf-token"] = csrfToken;
  const response = await fetch(`${API_BASE}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    signal,
  });
  if (response.ok) return response;
  const error = await toApiError(response);
  if (error.status === 401 && path !== "/sign-in") onSignedOut();
  throw error;
}

async function toApiError(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string; code?: string | null } | string; message?: string };
    const detail = typeof parsed.error === "string" ? { message: parsed.error } : parsed.error;
    const message = detail?.message ?? parsed.message;
    if (message) return new ApiError(response.status, message, (detail && "code" in detail ? detail.code : null) ?? null);
  } catch {
    // not JSON: fall through to the status text
  }
  return new ApiError(response.status, `${response.status} ${response.statusText || "error"}${text ? `: ${text.slice(0, 200)}` : ""}`);
}

async function json<T>(method: "GET" | "POST" | "DELETE", path: string, body?: unknown): Promise<T> {
  const response = await send(method, path, body);
  return (response.status === 204 ? undefined : await response.json()) as T;
}

export async function getSession(): Promise<Session> {
  const session = await json<Session>("GET", "/session");
  csrfToken = session.csrf_token;
  return session;
}

export async function signIn(account: string, password: string): Promise<Session> {
  const answer = await json<{ account: Account; csrf_token: string }>("POST", "/sign-in", { account, password });
  csrfToken = answer.csrf_token;
  return { profile: "hosted", signed_in: true, account: answer.account, csrf_token: answer.csrf_token };
}

export async function signOut(): Promise<void> {
  await json<void>("POST", "/sign-out");
  csrfToken = undefined;
}

export async function listModels(): Promise<Model[]> {
  return (await json<{ data: Model[] }>("GET", "/models")).data;
}

export async function listTokens(): Promise<TokenInfo[]> {
  return (await json<{ data: TokenInfo[] }>("GET", "/tokens")).data;
}

export function createToken(name: string, expiresAt: number | null): Promise<CreatedToken> {
  return json<CreatedToken>("POST", "/tokens", { name, expires_at: expiresAt });
}

export function revokeToken(id: string): Promise<TokenInfo> {
  return json<TokenInfo>("DELETE", `/tokens/${encodeURIComponent(id)}`);
}

export function getUsage(since: string): Promise<Usage> {
  return json<Usage>("GET", `/usage?since=${since}`);
}
