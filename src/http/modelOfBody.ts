/** The model a request body names, if it names one: before (or without) any protocol's parsing. */
export function modelOfBody(body: unknown): string | undefined {
  const name = typeof body === "object" && body !== null ? (body as { model?: unknown }).model : undefined;
  return typeof name === "string" ? name : undefined;
}
