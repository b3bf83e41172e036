// Issue 15: llama-server's POST /tokenize and /detokenize (also under /v1), on the generated models.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";
import { wordPieceVocabulary } from "../../src/testmodels/wordPieceVocabulary.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

type Piece = string | number[];

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** A piece's bytes: a string piece is UTF-8 text, an array piece the raw bytes of part of a character. */
function pieceBytes(piece: Piece): Buffer {
  return typeof piece === "string" ? Buffer.from(piece, "utf8") : Buffer.from(piece);
}

describe("POST /tokenize and /detokenize", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny"), rerank: await testModelPath("rerank-tiny") },
    });
  });
  afterAll(() => server?.close());

  async function call<T>(path: string, body: unknown): Promise<{ status: number; body: T & ErrorBody }> {
    const response = await postJson(`${server.url}${path}`, body);
    return { status: response.status, body: (await response.json()) as T & ErrorBody };
  }
  const tokenize = async (content: string, extra: object = {}, model = "tiny") => {
    const { status, body } = await call<{ tokens: number[] }>("/tokenize", { model, content, ...extra });
    expect(status, JSON.stringify(body)).toBe(200);
    return body.tokens;
  };
  const tokenizeWithPieces = async (content: string, model = "tiny") => {
    const { status, body } = await call<{ tokens: Array<{ id: number; piece: Piece }> }>("/tokenize", {
      model,
      content,
      with_pieces: true,
    });
    expect(status, JSON.stringify(body)).toBe(200);
    return body.tokens;
  };
  const detokenize = async (tokens: number[], model = "tiny") => {
    const { status, body } = await call<{ content: string }>("/detokenize", { model, tokens });
    expect(status, JSON.stringify(body)).toBe(200);
    return body.content;
  };

  it("round-trips arbitrary Unicode text through detokenize, exactly (byte-level vocabulary)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "binary", maxLength: 40 }), async (text) => {
        const tokens = await tokenize(text);
        expect(await detokenize(tokens)).toBe(text);
      }),
      { numRuns: 100 },
    );
  });

  it("gives pieces whose bytes concatenate to the text's UTF-8, with the same ids as without pieces", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "binary", maxLength: 40 }), async (text) => {
        const withPieces = await tokenizeWithPieces(text);
        expect(withPieces.map((token) => token.id)).toEqual(await tokenize(text));
        expect(Buffer.concat(withPieces.map((token) => pieceBytes(token.piece))).equals(Buffer.from(text, "utf8"))).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it("gives a piece that is part of a character as its bytes, as llama-server does, and whole ones as strings", async () => {
    // The tiny vocabulary learned English words, not "🎉": its four UTF-8 bytes are four tokens.
    const pieces = await tokenizeWithPieces("a 🎉 the");
    expect(pieces.map((token) => token.piece)).toEqual(["a", " ", [0xf0], [0x9f], [0x8e], [0x89], " the"]);
    // Detokenizing a partial character alone gives the replacement character, as llama-server's does.
    expect(await detokenize([pieces[2]?.id ?? -1])).toBe("\uFFFD");
  });

  it("parses special-token text as that token by default, and as text with parse_special false", async () => {
    const vocabulary = testVocabulary();
    const imEnd = vocabulary.tokens.indexOf("<|im_end|>");
    expect(await tokenize("<|im_end|>")).toEqual([imEnd]);
    const asText = await tokenize("<|im_end|>", { parse_special: false });
    expect(asText.length).toBeGreaterThan(1);
    expect(await detokenize(asText)).toBe("<|im_end|>");
    // Special tokens are shown as their text, as llama-server's /detokenize shows them.
    expect(await detokenize([imEnd])).toBe("<|im_end|>");
  });

  it("adds the model's special tokens with add_special: [CLS] and [SEP] for a WordPiece model", async () => {
    const words = wordPieceVocabulary();
    const plain = await tokenize("the library", {}, "embed");
    expect(plain).not.toContain(words.clsId);
    expect(await tokenize("the library", { add_special: true }, "embed")).toEqual([words.clsId, ...plain, words.sepId]);
    // The byte-level model's file says add no BOS (as Qwen2's): nothing is added.
    expect(await tokenize("the sea", { add_special: true })).toEqual(await tokenize("the sea"));
    const pieces = await tokenizeWithPieces("The Library", "embed");
    // WordPiece pieces: "▁" is a space, and the tokenizer lower-cases.
    expect(pieces.map((token) => token.piece)).toEqual([" the", " library"]);
  });

  it("tokenizes with any kind of model: chat, embedding, reranking", async () => {
    for (const model of ["tiny", "embed", "rerank"]) {
      const tokens = await tokenize("hello world", {}, model);
      expect(tokens.length).toBeGreaterThan(0);
      expect((await detokenize(tokens, model)).trim()).toBe("hello world");
    }
  });

  it("answers the same under /v1/tokenize and /v1/detokenize", async () => {
    const v1 = await call<{ tokens: unknown[] }>("/v1/tokenize", { model: "tiny", content: "a 🎉", with_pieces: true });
    const plain = await call<{ tokens: unknown[] }>("/tokenize", { model: "tiny", content: "a 🎉", with_pieces: true });
    expect(v1.status).toBe(200);
    expect(v1.body).toEqual(plain.body);
    const text = await call<{ content: string }>("/v1/detokenize", { model: "tiny", tokens: await tokenize("a 🎉") });
    expect(text).toEqual({ status: 200, body: { content: "a 🎉" } });
  });

  it("gives empty text for no tokens, and no tokens for empty text", async () => {
    expect(await tokenize("")).toEqual([]);
    expect(await detokenize([])).toBe("");
  });

  it.each([
    [
      "/detokenize",
      "a token id outside the vocabulary",
      { model: "tiny", tokens: [1, 999_999] },
      "tokens",
      /token id 999999 is outside this model's vocabulary \(ids 0 to \d+\)/,
    ],
    ["/detokenize", "a negative token id", { model: "tiny", tokens: [-1] }, "tokens[0]", /too small/i],
    ["/detokenize", "a fractional token id", { model: "tiny", tokens: [1.5] }, "tokens[0]", /expected int/],
    ["/detokenize", "tokens as a string", { model: "tiny", tokens: "1 2" }, "tokens", /expected array, got a string/],
    ["/detokenize", "no tokens", { model: "tiny" }, "tokens", /Missing required parameter/],
    ["/tokenize", "no content", { model: "tiny" }, "content", /Missing required parameter/],
    ["/tokenize", "content as a number", { model: "tiny", content: 5 }, "content", /expected string, got an integer/],
    ["/tokenize", "with_pieces as a string", { model: "tiny", content: "x", with_pieces: "yes" }, "with_pieces", /expected boolean/],
    ["/tokenize", "no model", { content: "x" }, "model", /Missing required parameter/],
  ])("%s refuses %s with a 400 naming the parameter, in the OpenAI error shape", async (path, _label, request, param, message) => {
    const { status, body } = await call(path, request);
    expect(status).toBe(400);
    expect(body).toEqual({ error: { message: expect.stringMatching(message), type: "invalid_request_error", param, code: null } });
  });

  it("answers an unknown model with a 404 model_not_found", async () => {
    for (const [path, body] of [
      ["/tokenize", { model: "nope", content: "x" }],
      ["/detokenize", { model: "nope", tokens: [1] }],
    ] as const) {
      const response = await call(path, body);
      expect(response.status).toBe(404);
      expect(response.body.error).toMatchObject({ code: "model_not_found", param: "model" });
    }
  });
});
