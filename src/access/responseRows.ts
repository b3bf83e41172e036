import type { StoredResponse } from "./ResponseStore.js";

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
