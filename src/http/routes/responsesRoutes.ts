import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AccessGate } from "../../access/AccessGate.js";
import type { ResponseArchive } from "../../storedResponses/ResponseArchive.js";
import type { StoredResponse } from "../../storedResponses/ResponseStore.js";
import type { ChatEvent } from "../../core/ChatEvent.js";
import type { Engine } from "../../core/Engine.js";
import { ServerError } from "../../core/ServerError.js";
import {
  fromResponseRequest,
  referencedItemIds,
  resolveItemReferences,
  toChatRequest,
} from "../../protocols/responses/fromResponseRequest.js";
import { ResponseStream } from "../../protocols/responses/ResponseStream.js";
import { endedWithoutResult } from "../../protocols/StreamTranslator.js";
import { retrieveQuerySchema, type DeletedResponse, type ResponseObject, type StoredInputItem } from "../../protocols/responses/schemas.js";
import { toInputItemList } from "../../protocols/responses/toInputItemList.js";
import { toInvalidRequestError } from "../../protocols/toInvalidRequestError.js";
import { engineOptions } from "../engineOptions.js";
import { translated } from "../translated.js";
import { ResponseEventWriter } from "../ResponseEventWriter.js";
import { pumpStream } from "../pumpStream.js";
import { described } from "../openapi.js";
import {
  deletedResponseSchema,
  inputItemListSchema,
  responseObjectSchema,
  responseStreamEventSchema,
} from "../../protocols/responses/responseSchemas.js";
import { createResponseSchema, inputItemsQuerySchema } from "../../protocols/responses/schemas.js";

/** A stored record as the protocol wrote it (the store keeps JSON and never looks inside). */
interface StoredWire {
  response: ResponseObject;
  input: StoredInputItem[];
}

function wireOf(record: StoredResponse): StoredWire {
  return record as unknown as StoredWire;
}

/**
 * OpenAI's Responses API: POST /v1/responses over the same engine as chat completions, and the
 * stored responses (GET and DELETE /v1/responses/{id}, GET …/input_items). A stored response is
 * its owner's: in the hosted profile the caller's account, and another account's id is a 404 as
 * an unknown one is.
 */
export function responsesRoutes(
  app: FastifyInstance,
  { engine, access, responses }: { engine: Engine; access?: AccessGate; responses: ResponseArchive },
): void {
  const config = { access: "caller" as const };
  const ownerOf = (request: FastifyRequest) => request.caller?.account.id ?? null;
  const stored = async (request: FastifyRequest): Promise<StoredWire> => {
    const { id } = request.params as { id: string };
    const record = await responses.find(id, ownerOf(request));
    if (!record) throw new ServerError("not_found", { message: `Response with id '${id}' not found.` });
    return wireOf(record);
  };

  app.post(
    "/responses",
    {
      config: described(config, {
        summary: "OpenAI Responses API: create a response, plain or streamed (typed server-sent events)",
        body: createResponseSchema,
        response: responseObjectSchema,
        produces: ["text/event-stream"],
        streamEvent: responseStreamEventSchema,
      }),
    },
    async (request, reply) => {
      const translatedRequest = await translated(engine, request.body, fromResponseRequest);
      const owner = ownerOf(request);
      const previousId = translatedRequest.settings.previous_response_id;
      const previous = previousId === null ? undefined : await responses.find(previousId, owner);
      if (previousId !== null && !previous) {
        throw new ServerError("previous_response_not_found", {
          param: "previous_response_id",
          message: `Previous response with id '${previousId}' not found.`,
        });
      }
      // `item_reference` items name stored items of the caller's own responses: looked up here, the translator does no I/O.
      const found = await responses.findItems(referencedItemIds(translatedRequest), owner);
      const parsed = await translated(engine, request.body, () => resolveItemReferences(translatedRequest, found));
      // Continuing: the earlier response's input and output come first.
      const prefix: StoredInputItem[] = previous ? [...wireOf(previous).input, ...wireOf(previous).response.output] : [];
      const chat = toChatRequest(parsed, prefix);
      const options = engineOptions(request, reply, access, chat.model, "chat");
      const stream = new ResponseStream(parsed.settings);
      const keep = async (response: ResponseObject) => {
        // Its own input items (the prefix's are kept with the earlier response) and its output can be referenced later by id.
        const items = [...parsed.input, ...response.output].map((item) => ({ id: item.id, item }));
        if (parsed.settings.store) await responses.save(response.id, owner, response, [...prefix, ...parsed.input], items);
      };
      const events = await engine.chat(chat, options);
      // The stream holds a decoding slot until it is closed: close it on every way out.
      try {
        if (!parsed.stream) {
          for await (const event of events) stream.next(event);
          if (stream.response.status === "in_progress") throw endedWithoutResult();
          await keep(stream.response);
          return stream.response;
        }
        // The response is stored before its final event is sent, so a client that reads the final
        // event can continue from it at once.
        const storing = {
          start: () => stream.start(),
          next: async (event: ChatEvent) => {
            const out = stream.next(event);
            if (event.type === "done") await keep(stream.response);
            return out;
          },
          end: () => stream.end(),
        };
        await pumpStream(new ResponseEventWriter(reply), events, storing, { signal: options.signal, log: request.log });
      } finally {
        await events.return();
      }
    },
  );

  app.get(
    "/responses/:id",
    { config: described(config, { summary: "A stored response", query: retrieveQuerySchema, response: responseObjectSchema }) },
    async (request) => {
      const query = retrieveQuerySchema.safeParse(request.query ?? {});
      if (!query.success) throw toInvalidRequestError(query.error, request.query);
      if (query.data.stream === "true") {
        throw new ServerError("invalid_request", {
          param: "stream",
          message:
            "Invalid value for 'stream': replaying a stored response's events is not supported by this server; retrieve it without 'stream'.",
        });
      }
      return (await stored(request)).response;
    },
  );

  app.get(
    "/responses/:id/input_items",
    {
      config: described(config, {
        summary: "The input items of a stored response",
        query: inputItemsQuerySchema,
        response: inputItemListSchema,
      }),
    },
    async (request) => toInputItemList((await stored(request)).input, request.query),
  );

  app.delete(
    "/responses/:id",
    { config: described(config, { summary: "Deletes a stored response", response: deletedResponseSchema }) },
    async (request): Promise<DeletedResponse> => {
      const { id } = request.params as { id: string };
      if (!(await responses.delete(id, ownerOf(request))))
        throw new ServerError("not_found", { message: `Response with id '${id}' not found.` });
      return { id, object: "response.deleted", deleted: true };
    },
  );
}
