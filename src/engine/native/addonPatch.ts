import { copyFile, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * Adds modelhost's native functions (decodeAndSample.cpp: a decode step and its samples in one libuv
 * task, and a generation loop that keeps stepping without the event loop) to node-llama-cpp's addon
 * for the length of a native build, then puts node-llama-cpp's sources back as they were. The
 * prebuilt binaries never have them; BatchDecoder uses them when the loaded binary does, and
 * node-llama-cpp's separate calls otherwise.
 *
 * The patch is two insertions into llama/addon/addon.cpp (the declarations, and the functions in the
 * exports' property list), plus the new file, which the addon's CMakeLists compiles with every
 * addon/*.cpp, plus two changes to llama/addon/AddonContext.cpp: its one llama_decode call becomes
 * modelhostDecode, which runs it on the decode thread that all the process's decodes share (see
 * decodeAndSample.cpp), after a declaration of it; and two to node-llama-cpp's CMakeLists.txt, which
 * build llama.cpp's tools/mtmd (images, through a vision model's projector) and link it into the
 * addon. llama.cpp's own sources are built as bundled, as llama-server is. It is checked against the pinned node-llama-cpp: on another version, or if the anchors are not each found exactly once, the
 * build goes ahead without it and says why.
 */

export const PATCHED_NODE_LLAMA_CPP_VERSION = "3.22.1";

/** The functions' names on node-llama-cpp's bindings object. */
export const DECODE_AND_SAMPLE = "modelhostDecodeAndSample";
export const GENERATE = "modelhostGenerate";
export const TRIM_MEMORY = "modelhostTrimMemory";
export const MULTIMODAL_LOAD = "modelhostMultimodalLoad";
export const MULTIMODAL_TOKENIZE = "modelhostMultimodalTokenize";
export const MULTIMODAL_EVALUATE = "modelhostMultimodalEvaluate";
export const MULTIMODAL_FREE = "modelhostMultimodalFree";
const FUNCTIONS = [DECODE_AND_SAMPLE, GENERATE, TRIM_MEMORY, MULTIMODAL_LOAD, MULTIMODAL_TOKENIZE, MULTIMODAL_EVALUATE, MULTIMODAL_FREE];

const SOURCE = path.resolve(import.meta.dirname, "../../../src/engine/native/decodeAndSample.cpp");
const COPIED_NAME = "ModelhostDecodeAndSample.cpp";
const REGISTER_ANCHOR = "Napi::Object registerCallback(Napi::Env env, Napi::Object exports) {\n";
const LAST_EXPORT_ANCHOR = '        Napi::PropertyDescriptor::Function("dispose", addonDispose),\n';

/** node-llama-cpp's llama folder: its addon's sources, and llama.cpp's once cloned for a build. */
export function llamaDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.resolve("node-llama-cpp"))), "../llama");
}

/** One edit of a file: `from`, found exactly once, becomes `to` (an insertion keeps `from` inside `to`). */
interface Edit {
  from: string;
  to: string;
}

/** `text` with each edit made in turn, or why it cannot be (an anchor missing or found twice). */
function applyEdits(text: string, edits: readonly Edit[], file: string): { patched: string } | { skipped: string } {
  let result = text;
  for (const { from, to } of edits) {
    const at = result.indexOf(from);
    if (at === -1 || result.indexOf(from, at + 1) !== -1) return { skipped: `${file} is not laid out as expected` };
    result = result.slice(0, at) + to + result.slice(at + from.length);
  }
  return { patched: result };
}

/** `text` with the edits undone, also when a build cut off (killed) left them in; the original is left as it is. */
function revertEdits(text: string, edits: readonly Edit[]): string {
  return edits.reduceRight((result, { from, to }) => result.replace(to, from), text);
}

const DECLARATION = `${FUNCTIONS.map((name) => `Napi::Value ${name}(const Napi::CallbackInfo& info);\n`).join("")}\n`;
const EXPORT = FUNCTIONS.map((name) => `        Napi::PropertyDescriptor::Function("${name}", ${name}),\n`).join("");

/** addon.cpp: the functions declared, and exported after node-llama-cpp's last export. */
const ADDON_EDITS: Edit[] = [
  { from: REGISTER_ANCHOR, to: DECLARATION + REGISTER_ANCHOR },
  { from: LAST_EXPORT_ANCHOR, to: LAST_EXPORT_ANCHOR + EXPORT },
];

const DECODE_CALL = "int r = llama_decode(ctx->ctx, ctx->batch);";
const CONTEXT_INCLUDE_ANCHOR = '#include "AddonContext.h"\n';

/** AddonContext.cpp: its one decode goes through modelhostDecode, declared after its include. */
const CONTEXT_EDITS: Edit[] = [
  { from: CONTEXT_INCLUDE_ANCHOR, to: `${CONTEXT_INCLUDE_ANCHOR}int modelhostDecode(llama_context* ctx, llama_batch batch);\n` },
  { from: DECODE_CALL, to: "int r = modelhostDecode(ctx->ctx, ctx->batch);" },
];

const COMMON_ANCHOR = "set(LLAMA_BUILD_COMMON ON)\n";
const LINK_ANCHOR = 'target_link_libraries(${PROJECT_NAME} "llama-common")\n';

/**
 * CMakeLists.txt: llama.cpp's switch for building tools/mtmd alone, for bindings, and mtmd linked
 * into the addon. Without MTMD_VIDEO, an image stb_image cannot decode is refused instead of being
 * handed to an ffmpeg subprocess.
 */
const CMAKE_EDITS: Edit[] = [
  { from: COMMON_ANCHOR, to: `${COMMON_ANCHOR}set(LLAMA_BUILD_MTMD ON)\nset(MTMD_VIDEO OFF CACHE BOOL "" FORCE)\n` },
  { from: LINK_ANCHOR, to: `${LINK_ANCHOR}target_link_libraries(\${PROJECT_NAME} "mtmd")\n` },
];

/** addon.cpp with the functions declared and exported, or why it cannot be. */
export const patchAddonSource = (original: string) => applyEdits(original, ADDON_EDITS, "addon.cpp");
/** addon.cpp as node-llama-cpp ships it. */
export const unpatchAddonSource = (text: string) => revertEdits(text, ADDON_EDITS);
/** AddonContext.cpp with its decode going through modelhostDecode, or why it cannot be. */
export const patchContextSource = (original: string) => applyEdits(original, CONTEXT_EDITS, "AddonContext.cpp");
/** AddonContext.cpp as node-llama-cpp ships it. */
export const unpatchContextSource = (text: string) => revertEdits(text, CONTEXT_EDITS);
/** node-llama-cpp's CMakeLists.txt building llama.cpp's mtmd and linking it into the addon, or why it cannot be. */
export const patchCMakeLists = (original: string) => applyEdits(original, CMAKE_EDITS, "CMakeLists.txt");
/** CMakeLists.txt as node-llama-cpp ships it. */
export const unpatchCMakeLists = (text: string) => revertEdits(text, CMAKE_EDITS);

/** One of node-llama-cpp's files the patch changes. */
interface SourcePatch {
  file: string;
  patch(original: string): { patched: string } | { skipped: string };
  unpatch(text: string): string;
}

const SOURCE_PATCHES: SourcePatch[] = [
  { file: "addon/addon.cpp", patch: patchAddonSource, unpatch: unpatchAddonSource },
  { file: "addon/AddonContext.cpp", patch: patchContextSource, unpatch: unpatchContextSource },
  { file: "CMakeLists.txt", patch: patchCMakeLists, unpatch: unpatchCMakeLists },
];

/**
 * node-llama-cpp's own step that puts llama.cpp's source (from its bundled git release, offline)
 * in llama/llama.cpp, which its build would take first anyway: the patch needs the files there.
 */
async function ensureLlamaCppSource(dir: string): Promise<void> {
  const clone = (await import(pathToFileURL(path.join(dir, "../dist/bindings/utils/cloneLlamaCppRepo.js")).href)) as {
    ensureLlamaCppRepoIsCloned(options: { progressLogs: boolean }): Promise<void>;
  };
  await clone.ensureLlamaCppRepoIsCloned({ progressLogs: false });
}

/**
 * Runs `build` with the patch applied (when it applies), restoring node-llama-cpp's sources after,
 * also when the build fails. Reports whether the patch went in.
 */
export async function withAddonPatch<T>(build: () => Promise<T>, log: (line: string) => void): Promise<T> {
  const dir = llamaDir();
  const version = (JSON.parse(await readFile(path.join(dir, "../package.json"), "utf8")) as { version: string }).version;
  if (version !== PATCHED_NODE_LLAMA_CPP_VERSION) {
    log(
      `modelhost: node-llama-cpp ${version} is not ${PATCHED_NODE_LLAMA_CPP_VERSION}: building without modelhost's decode-and-sample patch`,
    );
    return build();
  }
  await ensureLlamaCppSource(dir);
  const copiedFile = path.join(dir, "addon", COPIED_NAME);
  const files = await Promise.all(
    SOURCE_PATCHES.map(async ({ file, patch, unpatch }) => {
      const original = unpatch(await readFile(path.join(dir, file), "utf8"));
      return { path: path.join(dir, file), original, result: patch(original) };
    }),
  );
  const skipped = files.find((file) => "skipped" in file.result);
  if (skipped && "skipped" in skipped.result) {
    // What a build cut off (killed) left in the files comes out first.
    for (const file of files) await writeFile(file.path, file.original);
    log(`modelhost: ${skipped.result.skipped}: building without modelhost's decode-and-sample patch`);
    return build();
  }
  await copyFile(SOURCE, copiedFile);
  for (const file of files) if ("patched" in file.result) await writeFile(file.path, file.result.patched);
  log("modelhost: building node-llama-cpp's addon with modelhost's decode-and-sample patch");
  try {
    return await build();
  } finally {
    for (const file of files) await writeFile(file.path, file.original);
    await rm(copiedFile, { force: true });
  }
}
