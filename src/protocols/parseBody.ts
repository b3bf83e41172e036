import type { z } from "zod";
import { ServerError } from "../core/ServerError.js";
import { toInvalidRequestError } from "./toInvalidRequestError.js";

/** A request body checked against its wire schema: not an object, or the first violation, is a 400 naming the parameter. */
export function parseBody<Schema extends z.ZodType>(schema: Schema, body: unknown): z.infer<Schema> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ServerError("invalid_request", { message: "The request body must be a JSON object." });
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw toInvalidRequestError(parsed.error, body);
  return parsed.data;
}
