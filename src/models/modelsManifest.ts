import { randomBytes } from "node:crypto";
import { open, readdir, readFile, rename, rm, unlink } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { assertModelName, modelNameProblem } from "../core/modelName.js";
import { ServerError } from "../core/ServerError.js";
import { withFileLock } from "./fileLock.js";
import { defaultModelId, isListedModelFile, isPlainFileName, modelFileParts } from "./modelFiles.js";

/**
 * `models.json` in the models directory: ids and aliases for the files beside it, e.g.
 * `{"models":[{"file":"qwen2.5-0.5b-instruct-q4_k_m.gguf","id":"qwen2.5:0.5b","aliases":["gpt-4o-mini"]}]}`.
 * This module is the format's only reader and writer. Keys it does not know are kept on rewrite, so
 * nothing a person wrote into the file is lost.
 */
export const MANIFEST_FILE = "models.json";

const entrySchema = z.looseObject({
  file: z.string().min(1),
  id: z.string().min(1).optional(),
  aliases: z.array(z.string().min(1)).default([]),
  /** The vision projector (mmproj GGUF) beside it that the model reads images through. */
  projector: z.string().min(1).optional(),
  /**
   * LoRA adapters (adapter GGUFs beside it) applied over this model, each served as a model of its
   * own, `<id>+<name>`; `name` defaults to the file's name without `.gguf`, `scale` to 1.
   */
  adapters: z
    .array(z.looseObject({ file: z.string().min(1), name: z.string().min(1).optional(), scale: z.number().finite().optional() }))
    .default([]),
  /** The model that drafts for this one (speculative decoding, --speculation draft): a smaller model of its vocabulary, by name. */
  draft: z.string().min(1).optional(),
  /** Where `pull` fetched the file from (`hf.co/OWNER/REPO/FILE.gguf` or a URL). */
  source: z.string().optional(),
  /** SHA-256 of the file (of the first part of a split model), hex, recorded by `pull`. */
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
});

const manifestSchema = z.looseObject({ models: z.array(entrySchema) });

export type ManifestEntry = z.infer<typeof entrySchema>;

/** An adapter of an entry; as read by readManifest, with `problem` when it cannot be served (the file itself never has it). */
export type ManifestAdapter = ManifestEntry["adapters"][number] & { problem?: string };

/**
 * A manifest as read: its entries, or the problem that made it unreadable. `warnings` say what was
 * left out of a readable one (see `readManifest`).
 */
export type ManifestRead =
  { entries: ManifestEntry[]; problem?: undefined; warnings?: string[] } | { entries: []; problem: string; warnings?: undefined };

/** Parses the manifest's text; a problem is described, never thrown, so a reader can warn and go on. */
function parseManifest(text: string): ManifestRead {
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(text));
    if (parsed.success) return { entries: parsed.data.models };
    const issue = parsed.error.issues[0];
    return { entries: [], problem: `${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}` };
  } catch (error) {
    return { entries: [], problem: (error as Error).message };
  }
}

/**
 * Reads the manifest of a directory as models are listed and named from it; no file is an empty
 * manifest. What a person may have mistyped is left out with a warning rather than failing the
 * whole file: an entry whose `file` is not a plain file name in the directory (a path, `..`, a
 * hidden file) is skipped, so no model lives outside the directory, and an id or alias that is not
 * a valid model name is ignored (the file keeps its other names, or its file name).
 */
export async function readManifest(directory: string): Promise<ManifestRead> {
  const read = await readManifestFile(directory);
  return read.problem === undefined ? checkEntries(read.entries) : read;
}

function checkEntries(entries: ManifestEntry[]): ManifestRead {
  const warnings: string[] = [];
  const kept: ManifestEntry[] = [];
  for (const [index, entry] of entries.entries()) {
    const where = `${MANIFEST_FILE}: models.${index}`;
    if (!isPlainFileName(entry.file)) {
      warnings.push(
        `${where} is skipped: its file ${JSON.stringify(entry.file.slice(0, 100))} is not a plain file name in the models directory.`,
      );
      continue;
    }
    const checked = {
      ...entry,
      aliases: entry.aliases.filter((alias, aliasIndex) => nameIsValid(alias, `${where}.aliases.${aliasIndex}`, warnings)),
    };
    if (checked.id !== undefined && !nameIsValid(checked.id, `${where}.id`, warnings)) delete checked.id;
    if (checked.draft !== undefined && !nameIsValid(checked.draft, `${where}.draft`, warnings)) delete checked.draft;
    if (checked.projector !== undefined && !isPlainFileName(checked.projector)) {
      warnings.push(
        `${where}.projector is ignored: ${JSON.stringify(checked.projector.slice(0, 100))} is not a plain file name in the models directory.`,
      );
      delete checked.projector;
    }
    // Kept in place, with what is wrong with it: a request's `lora` ids are positions in the list.
    checked.adapters = checked.adapters.map((adapter, adapterIndex) =>
      checkedAdapter(adapter, `${where}.adapters.${adapterIndex}`, warnings),
    );
    kept.push(checked);
  }
  return warnings.length === 0 ? { entries: kept } : { entries: kept, warnings };
}

/**
 * An adapter as read: its file must be a plain file name in the directory, and its name one part of
 * a model name (it follows `base+`); one that is not is kept, with the `problem` a request for it is told.
 */
function checkedAdapter(adapter: ManifestAdapter, where: string, warnings: string[]): ManifestAdapter {
  const name = adapterName(adapter);
  const nameProblem = /[/:]/.test(name) ? "an adapter's name has no '/' or ':'" : modelNameProblem(name);
  const problem = !isPlainFileName(adapter.file)
    ? `its file ${JSON.stringify(adapter.file.slice(0, 100))} is not a plain file name in the models directory`
    : nameProblem === undefined
      ? undefined
      : `its name ${JSON.stringify(name.slice(0, 100))} is not valid (${nameProblem})`;
  if (problem === undefined) return adapter;
  warnings.push(`${where} is not served: ${problem}.`);
  return { ...adapter, problem };
}

/** The name an adapter is served under after its base's (`base+name`). */
export function adapterName(adapter: ManifestAdapter): string {
  return adapter.name ?? defaultModelId(adapter.file);
}

function nameIsValid(name: string, where: string, warnings: string[]): boolean {
  const problem = modelNameProblem(name);
  if (problem !== undefined) warnings.push(`${where} is ignored: ${problem}.`);
  return problem === undefined;
}

/** The manifest as written, entries unchecked: what a rewrite must keep. */
async function readManifestFile(directory: string): Promise<ManifestRead> {
  let text: string;
  try {
    text = await readFile(path.join(directory, MANIFEST_FILE), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { entries: [] };
    throw error;
  }
  return parseManifest(text);
}

/** The id a manifest entry gives its file. */
export function entryId(entry: ManifestEntry): string {
  return entry.id ?? defaultModelId(entry.file);
}

/**
 * Reads, changes and writes the manifest under a lock, atomically (a temporary file renamed over the
 * old one), so a server and a CLI command changing it at once both see their change kept, and a
 * crash leaves the old or the new file, never half of one. A broken manifest is refused rather than
 * overwritten: it may hold a person's work.
 */
export async function updateManifest(directory: string, change: (entries: ManifestEntry[]) => void): Promise<ManifestEntry[]> {
  return withManifestLock(directory, async () => {
    const read = await readManifestFile(directory);
    if (read.problem !== undefined) {
      throw new ServerError("internal_error", {
        message: `${MANIFEST_FILE} in the models directory is not valid (${read.problem}); fix or remove it before changing models.`,
      });
    }
    const entries = read.entries.map((entry) => ({ ...entry, aliases: [...entry.aliases] }));
    change(entries);
    await writeManifest(directory, entries.map(tidy));
    return entries;
  });
}

/**
 * Names a file: gives it `id` (when given; the previous id is dropped) and adds `aliases`, creating
 * its entry if needed. Refuses a name that another model already answers to.
 */
export async function nameModel(
  directory: string,
  names: { file: string; id?: string; aliases?: string[]; source?: string; sha256?: string; projector?: string },
): Promise<void> {
  const file = relativeFile(directory, names.file);
  for (const name of [...(names.id === undefined ? [] : [names.id]), ...(names.aliases ?? [])]) assertModelName(name, "name");
  const files = await listedFiles(directory);
  await updateManifest(directory, (entries) => {
    const entry = entryFor(entries, file);
    const wanted = [...(names.id === undefined ? [] : [names.id]), ...(names.aliases ?? [])];
    for (const name of wanted) assertFree(entries, files, name, file);
    if (names.id !== undefined) entry.id = names.id;
    if (names.source !== undefined) entry.source = names.source;
    if (names.sha256 !== undefined) entry.sha256 = names.sha256;
    if (names.projector !== undefined) entry.projector = relativeFile(directory, names.projector);
    for (const alias of names.aliases ?? []) if (alias !== entryId(entry) && !entry.aliases.includes(alias)) entry.aliases.push(alias);
    entry.aliases = entry.aliases.filter((alias) => alias !== entryId(entry));
  });
}

/**
 * Declares `adapter` (a LoRA adapter's file) over the model of `base` (its file), last in its list,
 * unless it is there already: served as `<base id>+<name>`, the name the adapter's file name without `.gguf`.
 */
export async function addAdapter(directory: string, base: string, adapter: string): Promise<void> {
  const [baseFile, adapterFile] = [relativeFile(directory, base), relativeFile(directory, adapter)];
  await updateManifest(directory, (entries) => {
    const entry = entryFor(entries, baseFile);
    if (!entry.adapters.some((each) => sameFile(each.file, adapterFile))) entry.adapters.push({ file: adapterFile });
  });
}

/** Adds one alias to a file's model (its entry is created if the file had none). */
export async function addAlias(directory: string, file: string, alias: string): Promise<void> {
  await nameModel(directory, { file, aliases: [alias] });
}

/** Removes an alias wherever it is; false when no model had it. */
export async function removeAlias(directory: string, alias: string): Promise<boolean> {
  let found = false;
  await updateManifest(directory, (entries) => {
    for (const entry of entries) {
      const kept = entry.aliases.filter((name) => name !== alias);
      found ||= kept.length !== entry.aliases.length;
      entry.aliases = kept;
    }
  });
  return found;
}

/**
 * Deletes a model: its file (every part of a split model), then its manifest entry with its id and
 * aliases. Files go first, so an interruption leaves an entry naming an absent file (which the
 * registry skips), never an unnamed file listed under its file name.
 */
export async function deleteModel(directory: string, file: string): Promise<void> {
  const relative = relativeFile(directory, file);
  for (const part of modelFileParts(relative)) await rm(path.join(directory, part), { force: true });
  // Its projector goes with it, unless another model reads images through it too.
  const { entries: read } = await readManifest(directory);
  const projector = read.find((entry) => sameFile(entry.file, relative))?.projector;
  if (projector !== undefined && !read.some((entry) => !sameFile(entry.file, relative) && entry.projector === projector)) {
    await rm(path.join(directory, projector), { force: true });
  }
  await updateManifest(directory, (entries) => {
    const index = entries.findIndex((entry) => sameFile(entry.file, relative));
    if (index >= 0) entries.splice(index, 1);
  });
}

function entryFor(entries: ManifestEntry[], file: string): ManifestEntry {
  let entry = entries.find((candidate) => sameFile(candidate.file, file));
  if (!entry) {
    entry = { file, aliases: [], adapters: [] };
    entries.push(entry);
  }
  return entry;
}

/** The file (relative to the directory) of the model that answers to `name`, if any. */
export async function fileNamed(directory: string, name: string): Promise<string | undefined> {
  const [{ entries }, files] = await Promise.all([readManifest(directory), listedFiles(directory)]);
  return ownerOf(entries, files, name);
}

/** A name belongs to a manifest entry (its id or an alias), or else to a file named after it. */
function ownerOf(entries: ManifestEntry[], files: string[], name: string, except?: string): string | undefined {
  const other = (file: string) => except === undefined || !sameFile(file, except);
  return (
    entries.find((entry) => other(entry.file) && (entryId(entry) === name || entry.aliases.includes(name)))?.file ??
    files.find((file) => other(file) && !entries.some((entry) => sameFile(entry.file, file)) && defaultModelId(file) === name)
  );
}

function assertFree(entries: ManifestEntry[], files: string[], name: string, file: string): void {
  const owner = ownerOf(entries, files, name, file);
  if (owner !== undefined) {
    throw new ServerError("invalid_request", { message: `The name "${name}" is already used by another model (${path.basename(owner)}).` });
  }
}

async function listedFiles(directory: string): Promise<string[]> {
  try {
    return (await readdir(directory)).filter(isListedModelFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

/**
 * Files are stored by their name in the directory (as people write them). A model's file is always
 * one there: any other path is refused, so no change to models.json or deletion reaches outside.
 */
function relativeFile(directory: string, file: string): string {
  const relative = path.relative(path.resolve(directory), path.resolve(directory, file));
  if (!isPlainFileName(relative)) {
    throw new ServerError("invalid_request", { message: "A model's file must be a file in the models directory." });
  }
  return relative;
}

function sameFile(a: string, b: string): boolean {
  return path.normalize(a) === path.normalize(b);
}

/** Drops what the reader would default anyway, so the file stays as short as a person would write it. */
function tidy(entry: ManifestEntry): Record<string, unknown> {
  const { file, id, aliases, adapters, source, sha256, ...rest } = entry;
  return {
    file,
    ...(id === undefined ? {} : { id }),
    ...(aliases.length > 0 ? { aliases } : {}),
    ...(adapters.length > 0 ? { adapters } : {}),
    ...rest,
    ...(source === undefined ? {} : { source }),
    ...(sha256 === undefined ? {} : { sha256 }),
  };
}

async function writeManifest(directory: string, models: Record<string, unknown>[]): Promise<void> {
  const target = path.join(directory, MANIFEST_FILE);
  // Dot-prefixed and not `.gguf`: never listed, and on the same file system so rename is atomic.
  const temporary = path.join(directory, `.${MANIFEST_FILE}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const handle = await open(temporary, "w");
  try {
    await handle.writeFile(`${JSON.stringify({ models }, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => {});
    throw error;
  }
}

// One lock per directory in this process (a promise chain), plus a lock file for other processes.
const inProcess = new Map<string, Promise<unknown>>();

async function withManifestLock<T>(directory: string, work: () => Promise<T>): Promise<T> {
  const key = path.resolve(directory);
  const previous = inProcess.get(key) ?? Promise.resolve();
  const lock = path.join(key, `.${MANIFEST_FILE}.lock`);
  const run = previous
    .catch(() => {})
    // An update takes milliseconds: a lock older than 10 s is a crash's leftover.
    .then(() =>
      withFileLock(
        lock,
        { waitMs: 15_000, staleAfterMs: 10_000, busyMessage: `${MANIFEST_FILE} is locked by another modelhost process; try again.` },
        work,
      ),
    );
  inProcess.set(key, run);
  try {
    return await run;
  } finally {
    if (inProcess.get(key) === run) inProcess.delete(key);
  }
}
