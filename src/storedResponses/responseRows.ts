import type { StoredItem, StoredResponse } from "./ResponseStore.js";

// What the SQLite and PostgreSQL response stores share beyond their storage: the row of their
// (identically named) columns and its mapping. JSON is stored as text in both: the stores never
// query inside it, and text comes back byte for byte.

export interface ResponseColumns {
  id: string;
  owner: string | null;
  /** A number from SQLite; text from PostgreSQL's bigint. */
  created_at: number | string;
  expires_at: number | string;
  response: string;
  input: string;
}

/** The columns in insertion order, for both stores' INSERT. */
export const RESPONSE_COLUMNS = ["id", "owner", "created_at", "expires_at", "response", "input"] as const;

export function toResponseColumns(record: StoredResponse): ResponseColumns {
  return {
    id: record.id,
    owner: record.owner,
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    response: JSON.stringify(record.response),
    input: JSON.stringify(record.input),
  };
}

export function toStoredResponse(row: ResponseColumns): StoredResponse {
  return {
    id: row.id,
    owner: row.owner,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    response: JSON.parse(row.response) as object,
    input: JSON.parse(row.input) as object[],
  };
}

/** A row of `stored_response_items`: one item of a stored response, with its response's owner and expiry. */
export interface ItemColumns {
  item_id: string;
  response_id: string;
  owner: string | null;
  created_at: number;
  expires_at: number;
  item: string;
}

/** The item columns in insertion order. */
export const ITEM_COLUMNS = ["item_id", "response_id", "owner", "created_at", "expires_at", "item"] as const;

/** The item rows of a response: one per id (a response that lists an id twice keeps its first). */
export function toItemColumns(record: StoredResponse, items: readonly StoredItem[]): ItemColumns[] {
  const rows = new Map<string, ItemColumns>();
  for (const { id, item } of items) {
    if (rows.has(id)) continue;
    rows.set(id, {
      item_id: id,
      response_id: record.id,
      owner: record.owner,
      created_at: record.createdAt,
      expires_at: record.expiresAt,
      item: JSON.stringify(item),
    });
  }
  return [...rows.values()];
}

/** Found item rows by id, read oldest first, so that the latest response's copy of an id wins. */
export function toItemMap(rows: ReadonlyArray<Pick<ItemColumns, "item_id" | "item">>): Map<string, object> {
  return new Map(rows.map((row) => [row.item_id, JSON.parse(row.item) as object]));
}
