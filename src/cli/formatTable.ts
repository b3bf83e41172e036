/** Rows as aligned columns for the terminal; the first row is the header. */
export function formatTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** What a listing command prints: a table for people, or with --json the records themselves, for scripts. */
export function formatListing<T>(records: T[], json: boolean, header: string[], row: (record: T) => string[]): string {
  return json ? JSON.stringify(records, null, 2) : formatTable([header, ...records.map(row)]);
}
