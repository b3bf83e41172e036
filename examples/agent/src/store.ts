// Where chunks and their vectors live: a small interface, and its implementation on SQLite with
// the sqlite-vec extension (a vec0 virtual table: exact nearest-neighbour search by cosine
// distance, in the same file as the text). Swapping in another vector store means implementing
// `ChunkStore`; nothing else changes. It also keeps the folders ingested, whose images view_image
// shows.
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";

export interface NewChunk {
  text: string;
  /** Index of the chunk within its file, from 0. */
  position: number;
  vector: Float32Array;
}

export interface StoredChunk {
  text: string;
  source: string;
  position: number;
  /** Cosine distance to the query vector: 0 same direction, 2 opposite. */
  distance: number;
}

export interface ChunkStore {
  /** Content hash of each stored file, by source path. */
  fileHashes(): Map<string, string>;
  /** Replaces everything stored for a file (one transaction). */
  replaceFile(source: string, hash: string, chunks: NewChunk[]): void;
  removeFile(source: string): void;
  nearest(vector: Float32Array, k: number): StoredChunk[];
  chunkCount(): number;
  /** Records a folder that was ingested: the image files under it are the ones view_image shows. */
  addFolder(folder: string): void;
  /** The folders ingested, in the order first ingested. */
  folders(): string[];
  close(): void;
}

export class SqliteVecStore implements ChunkStore {
  private readonly db: Database.Database;

  /**
   * @param embeddingModel recorded on first use: vectors of different models are not comparable,
   *   so a store built with one model refuses another instead of returning meaningless neighbours.
   */
  constructor(
    file: string,
    private readonly embeddingModel: string,
  ) {
    if (file !== ":memory:") fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    sqliteVec.load(this.db);
    this.db.pragma("journal_mode = WAL");
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS files (source TEXT PRIMARY KEY, hash TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS folders (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
      CREATE TABLE IF NOT EXISTS chunks (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        position INTEGER NOT NULL,
        text TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks(source);
    `);
    const model = this.meta("embedding_model");
    if (model !== undefined && model !== embeddingModel) {
      throw new Error(
        `${file} holds vectors of the embedding model ${model}, not ${embeddingModel}: use another AGENT_DATABASE, or delete it and ingest again.`,
      );
    }
  }

  fileHashes(): Map<string, string> {
    const rows = this.db.prepare("SELECT source, hash FROM files").all() as { source: string; hash: string }[];
    return new Map(rows.map((row) => [row.source, row.hash]));
  }

  replaceFile(source: string, hash: string, chunks: NewChunk[]): void {
    const dimensions = chunks[0]?.vector.length;
    this.db.transaction(() => {
      if (dimensions !== undefined) this.ensureVectorTable(dimensions);
      this.deleteFile(source);
      this.db.prepare("INSERT INTO files (source, hash) VALUES (?, ?)").run(source, hash);
      const insertChunk = this.db.prepare("INSERT INTO chunks (source, position, text) VALUES (?, ?, ?)");
      const insertVector = this.db.prepare("INSERT INTO vectors (rowid, embedding) VALUES (?, ?)");
      for (const chunk of chunks) {
        const { lastInsertRowid } = insertChunk.run(source, chunk.position, chunk.text);
        // vec0 wants an integer rowid; better-sqlite3 binds JavaScript numbers as REAL, BigInt as INTEGER.
        insertVector.run(BigInt(lastInsertRowid), vectorBytes(chunk.vector));
      }
    })();
  }

  removeFile(source: string): void {
    this.db.transaction(() => this.deleteFile(source))();
  }

  nearest(vector: Float32Array, k: number): StoredChunk[] {
    if (this.meta("dimensions") === undefined) return []; // nothing ingested yet
    return this.db
      .prepare(
        `SELECT chunks.text, chunks.source, chunks.position, nearest.distance
         FROM (SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ?) AS nearest
         JOIN chunks ON chunks.id = nearest.rowid
         ORDER BY nearest.distance`,
      )
      .all(vectorBytes(vector), k) as StoredChunk[];
  }

  chunkCount(): number {
    return (this.db.prepare("SELECT count(*) AS n FROM chunks").get() as { n: number }).n;
  }

  addFolder(folder: string): void {
    this.db.prepare("INSERT INTO folders (path) VALUES (?) ON CONFLICT (path) DO NOTHING").run(folder);
  }

  folders(): string[] {
    return (this.db.prepare("SELECT path FROM folders ORDER BY id").all() as { path: string }[]).map((row) => row.path);
  }

  close(): void {
    this.db.close();
  }

  private deleteFile(source: string): void {
    if (this.meta("dimensions") !== undefined) {
      this.db.prepare("DELETE FROM vectors WHERE rowid IN (SELECT id FROM chunks WHERE source = ?)").run(source);
    }
    this.db.prepare("DELETE FROM chunks WHERE source = ?").run(source);
    this.db.prepare("DELETE FROM files WHERE source = ?").run(source);
  }

  /** The vector table is created with the first vectors, when their size is known. */
  private ensureVectorTable(dimensions: number): void {
    const existing = this.meta("dimensions");
    if (existing === undefined) {
      this.db.exec(`CREATE VIRTUAL TABLE vectors USING vec0(embedding float[${dimensions}] distance_metric=cosine)`);
      this.setMeta("dimensions", String(dimensions));
      this.setMeta("embedding_model", this.embeddingModel);
    } else if (Number(existing) !== dimensions) {
      throw new Error(`The store holds ${existing}-dimensional vectors; ${this.embeddingModel} gave ${dimensions}.`);
    }
  }

  private meta(key: string): string | undefined {
    return (this.db.prepare("SELECT value FROM meta WHERE key = ?").get(key) as { value: string } | undefined)?.value;
  }

  private setMeta(key: string, value: string): void {
    this.db.prepare("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(key, value);
  }
}

function vectorBytes(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
}
