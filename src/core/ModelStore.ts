import type { ModelInfo } from "./ModelInfo.js";

/** A progress report, in the shape of Ollama's `/api/pull` stream (`{status, digest, total, completed}`). */
export interface PullProgress {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

export interface PullResult {
  /**
   * The model's id: the reference as typed when it is a valid model name, else (a URL, a file in a
   * repository) the file's name without `.gguf`; or the model's earlier id, which it then aliases.
   */
  id: string;
  /** Path of the model's file (the first part of a split model). */
  path: string;
  /** A LoRA adapter pulled for a model (`adapterOf`): the name it is served under, `<model>+<adapter>`. */
  adapter?: string;
  /** Bytes fetched over the network by this pull (0 when the model was already there). */
  downloadedBytes: number;
}

export interface PullRequestOptions {
  /** Aborting it stops the pull; what was downloaded stays, and the next pull resumes it. */
  signal?: AbortSignal;
  onProgress?: (progress: PullProgress) => void;
}

/** What a deletion removed: one alias of `model`, or `model` itself with its files and all its names. */
export type ModelDeletion = { kind: "alias"; model: ModelInfo } | { kind: "model"; model: ModelInfo };

/**
 * Changes the installed models: names, deletions, pulls. HTTP routes talk only to this interface,
 * never to the models directory, as they talk to the `Engine` to run models. Every change is seen
 * by the engine's names from the next request on (a copy resolves, a deleted name no longer does).
 */
export interface ModelStore {
  /**
   * Gives the model `source` answers to the new name `destination` (an alias). model_not_found
   * (param `source`) when no model answers to `source`; invalid_request when another model already
   * answers to `destination`.
   */
  copy(source: string, destination: string): Promise<void>;
  /**
   * Deletes a name: an alias goes alone; a model's id takes its file (every part of a split model),
   * its other names and its aliases, and unloads it (at once if idle, else when its last request
   * ends). model_not_found (param `model`) when no model answers to `name`.
   */
  delete(name: string): Promise<ModelDeletion>;
  /** Pulls a model into the models directory (`modelhost pull`, `POST /api/pull`), with the server's pull settings. */
  pull(reference: string, options?: PullRequestOptions): Promise<PullResult>;
}
