import type { ChatMessage, ChatRequest, ImageSource, MessageImage } from "../core/ChatRequest.js";
import type { Engine } from "../core/Engine.js";
import { decorateEngine } from "../core/decorateEngine.js";
import { readsImages } from "../core/ModelInfo.js";
import { checkImage, decodeBase64, noProjectorMessage, parseDataUrl, type ImageInput, type ImageLimits } from "../core/images.js";
import { ServerError } from "../core/ServerError.js";

/** What requests' images may be, and where they may come from (the --max-image* and --image-url* settings). */
export interface ImagePolicy extends ImageLimits {
  /** The most images one request may hold, across its messages. */
  maxImages: number;
  /** Fetch images given by http(s) URL (off by default: the server would fetch what a client names). */
  fetchUrls: boolean;
  /** How long fetching one image may take, in ms. */
  fetchTimeoutMs: number;
}

/**
 * The engine, with every chat request's images made bytes the server has checked before the engine
 * sees them: the wire formats give base64 (data URLs, bare fields) or URLs, and each becomes an
 * `ImageSource` of type `checked` here, once, for every format. A model that reads no images is
 * named in the error before any image is decoded.
 */
export function resolveImages(engine: Engine, policy: ImagePolicy): Engine {
  const resolved = async (request: ChatRequest, signal: AbortSignal): Promise<ChatRequest> => {
    const images = request.messages.flatMap((message) => (message.role === "user" ? (message.images ?? []) : []));
    if (images.length === 0) return request;
    const model = await engine.findModel(request.model);
    // An unknown model is the engine's error to give, in its words, whatever the images are.
    if (!model) return request;
    if (!readsImages(model)) {
      throw new ServerError("invalid_request", {
        param: images[0]!.param,
        message: noProjectorMessage(request.model),
      });
    }
    if (images.length > policy.maxImages) {
      throw new ServerError("invalid_request", {
        param: images[policy.maxImages]!.param,
        message: `The request holds ${images.length} images, and a request may hold at most ${policy.maxImages} (--max-images).`,
      });
    }
    const messages = await Promise.all(
      request.messages.map(async (message): Promise<ChatMessage> => {
        if (message.role !== "user" || !message.images?.length) return message;
        const checked = await Promise.all(message.images.map((image) => checkedImage(image, policy, signal)));
        return { ...message, images: checked };
      }),
    );
    return { ...request, messages };
  };
  return decorateEngine(engine, {
    chat: async (request, options) => engine.chat(await resolved(request, options.signal), options),
    chatChoices: async (request, options) => engine.chatChoices(await resolved(request, options.signal), options),
    renderPrompt: async (request, options) => engine.renderPrompt(await resolved(request, options.signal), options),
  });
}

async function checkedImage(image: MessageImage, policy: ImagePolicy, signal: AbortSignal): Promise<MessageImage> {
  const source = image.source;
  switch (source.type) {
    case "checked":
      return image;
    case "base64": {
      const bytes = decodeBase64(source.data, policy.maxBytes);
      if ("refused" in bytes) throw refused(image.param, bytes.refused);
      return withImage(image, checkImage(bytes, source.mediaType, policy, image.param));
    }
    case "url": {
      if (source.url.toLowerCase().startsWith("data:")) {
        const data = parseDataUrl(source.url, policy.maxBytes);
        if ("refused" in data) throw refused(image.param, data.refused);
        return withImage(image, checkImage(data.bytes, data.mediaType, policy, image.param));
      }
      const { bytes, mediaType } = await fetchImage(source.url, image.param, policy, signal);
      return withImage(image, checkImage(bytes, mediaType, policy, image.param));
    }
    default:
      return source satisfies never;
  }
}

function withImage(image: MessageImage, checked: ImageInput): MessageImage {
  return { ...image, source: { type: "checked", image: checked } satisfies ImageSource };
}

function refused(param: string, reason: string): ServerError {
  return new ServerError("invalid_request", { param, message: `Invalid value for '${param}': the image is not accepted: ${reason}.` });
}

/**
 * An image by URL, where the operator allows it: http(s) only, in at most `fetchTimeoutMs`, and
 * read only up to `maxBytes` (a larger body is refused as it arrives, not after).
 */
async function fetchImage(
  url: string,
  param: string,
  policy: ImagePolicy,
  signal: AbortSignal,
): Promise<{ bytes: Uint8Array; mediaType: string | undefined }> {
  if (!/^https?:\/\//i.test(url)) throw refused(param, "an image URL must be a data: URL, or an http(s) URL where the server fetches them");
  if (!policy.fetchUrls) {
    throw refused(param, "this server does not fetch images by URL (--image-urls is off); send the image as a data: URL or base64");
  }
  const deadline = AbortSignal.timeout(policy.fetchTimeoutMs);
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.any([signal, deadline]), redirect: "follow" });
  } catch (error) {
    if (signal.aborted) throw error;
    throw refused(
      param,
      deadline.aborted
        ? `fetching it took longer than ${policy.fetchTimeoutMs} ms`
        : `it could not be fetched (${(error as Error).message})`,
    );
  }
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    throw refused(param, `fetching it gave HTTP ${response.status}`);
  }
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    for await (const chunk of response.body) {
      length += chunk.length;
      // Leaving the loop cancels the download.
      if (length > policy.maxBytes) {
        throw refused(param, `it is larger than the ${policy.maxBytes} bytes an image may have (--max-image-bytes)`);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ServerError || signal.aborted) throw error;
    throw refused(param, deadline.aborted ? `fetching it took longer than ${policy.fetchTimeoutMs} ms` : "its download was cut short");
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  const type = response.headers.get("content-type")?.split(";")[0]?.trim().toLowerCase();
  // A server that does not say, or says only "bytes", declares nothing: the bytes decide.
  return { bytes, mediaType: type === undefined || type === "application/octet-stream" ? undefined : type };
}
