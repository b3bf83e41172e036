import { ServerError } from "../../core/ServerError.js";
import { toInvalidRequestError } from "../toInvalidRequestError.js";
import { inputItemsQuerySchema, type InputItemList, type StoredInputItem } from "./schemas.js";

/**
 * One page of a stored response's input items, OpenAI's cursor list: `order` (default desc,
 * newest first), `limit` (1-100, default 20), `after` = the id of the last item of the previous
 * page, which the official client sends while `has_more`.
 */
export function toInputItemList(items: readonly StoredInputItem[], query: unknown): InputItemList {
  const parsed = inputItemsQuerySchema.safeParse(query ?? {});
  if (!parsed.success) throw toInvalidRequestError(parsed.error, query);
  const { limit, order, after } = parsed.data;
  const ordered = order === "asc" ? [...items] : [...items].reverse();
  let start = 0;
  if (after !== undefined) {
    const index = ordered.findIndex((item) => item.id === after);
    if (index < 0)
      throw new ServerError("invalid_request", {
        param: "after",
        message: `Invalid value for 'after': the response has no input item with id '${after}'.`,
      });
    start = index + 1;
  }
  const data = ordered.slice(start, start + limit);
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < ordered.length,
  };
}
