// The embedding test model's own small tokenizer: WordPiece in the style of uncased BERT
// (bert-base-uncased, all-MiniLM, bge), which llama.cpp loads as `tokenizer.ggml.model = "bert"`.
//
// The vocabulary is spelled here as Hugging Face spells it: a token that starts a word is plain
// ("the"), a token that continues one carries "##" ("##ing"). llama.cpp instead stores the
// phantom-space spelling that convert_hf_to_gguf.py writes: "▁the" (U+2581) starts a word and
// "ing" continues one; control tokens stay as they are. `tokens` is that spelling.
//
// How llama.cpp tokenizes (llm_tokenizer_wpm_session in src/llama-vocab.cpp): it lower-cases and
// strips accents (NFD, then drops combining marks) unless `tokenizer.ggml.normalizer.*` says
// otherwise, drops control characters, splits on whitespace and makes every punctuation mark,
// ASCII symbol and CJK ideograph a word of its own; then it matches each word, prefixed with "▁",
// greedily longest-first against the vocabulary. A word with any piece it cannot match becomes a
// single [UNK]. Adding special tokens puts [CLS] (the BOS id) in front and [SEP] at the end.
//
// Contents: the five BERT control tokens; every printable ASCII character except the capital
// letters (which lower-casing never lets through, as in bert-base-uncased) both as a word start
// and as a "##" continuation, so any ASCII word can be spelled; and pieces learned,
// deterministically, from a short English sample the way Hugging Face's WordPiece trainer does
// (BPE merges over "##"-marked symbols), so common words are one token and others split into
// realistic subwords.
import { TokenType } from "./testVocabulary.js";
import { trainPairMerges } from "./trainPairMerges.js";

export interface WordPieceVocabulary {
  /** `tokenizer.ggml.model` */
  readonly model: "bert";
  /** Token texts by id in WordPiece spelling: "[CLS]", "the", "##ing". */
  readonly pieces: readonly string[];
  /** Token texts by id as llama.cpp stores them (`tokenizer.ggml.tokens`): "[CLS]", "▁the", "ing". */
  readonly tokens: readonly string[];
  /** llama_token_type per token: control for the bracketed tokens, normal for the rest. */
  readonly tokenTypes: readonly number[];
  readonly padId: number;
  readonly unkId: number;
  readonly clsId: number;
  readonly sepId: number;
  readonly maskId: number;
}

/** BERT's control tokens, in the order bert-base-uncased numbers them (there: 0 and 100-103). */
const SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] as const;

/** Hugging Face's continuing-subword prefix. */
const CONTINUATION = "##";
/** The phantom space llama.cpp puts before each word (U+2581, "▁"). */
const WORD_START = "\u2581";

/** How many pieces to learn at most; the sample runs out of pairs seen twice after 298, giving 439 tokens. */
const MERGE_COUNT = 400;

/** Original English text the pieces are learned from. Changing it changes the vocabulary. */
const TRAINING_TEXT = `A library is a quiet place where people come to read, study and think. The building in the centre of the city is more than a hundred years old, and its reading room has tall windows that let in the afternoon sun. Students sit at the long wooden tables with their notes, and older readers look through newspapers from every part of the country. Nobody speaks loudly, but the room is never completely silent: pages turn, chairs move, and someone is always searching for a pencil.

The librarians know where everything is. If you ask them for a book about the history of music, a guide to the mountains in the north, or a collection of poems written during the war, they will find it for you in a few minutes. They also help visitors use the computers, print documents, and search the online catalogue, which lists more than two million books, maps, recordings and photographs.

Reading is one of the most useful things a person can learn. A child who reads every day builds a larger vocabulary, understands other people better, and finds it easier to write clearly. Researchers have studied this for many years, and their results are consistent: reading for pleasure is connected with better learning in almost every subject, including science and mathematics.

Computers have changed the way we find information. Instead of walking to a shelf, we type a question and receive thousands of answers in less than a second. Search engines compare the words in the question with the words in each document, and modern systems go further: they turn every sentence into a list of numbers, called an embedding, so that sentences with similar meanings are close to each other even when they share no words. A question about cheap flights can then find a page about inexpensive air travel.

Building such a system requires good data, careful testing and a lot of patience. The engineers who design it measure how often the right document appears at the top of the results, and they change the model until the answers improve. They also think about speed, because people expect an answer immediately, and about cost, because every computer in a large data centre uses electricity.

Not every question has one correct answer. Some people want a short summary, while others want to read the whole story, compare different opinions and decide for themselves. A good system shows both: a clear answer first, and then the documents it came from, so that the reader can check the facts. When the sources disagree, it should say so, because a confident answer that turns out to be wrong is worse than an honest one that admits what is not known.

The same ideas work for pictures, songs and even computer programs. A photograph of a dog running on the beach and the sentence "a dog plays by the sea" can be placed near each other, and a song can be found by humming a few notes. Teachers use these tools to prepare lessons, doctors use them to find similar cases, and shop owners use them to recommend products that their customers might like.

In the evening, when the library closes, the lights are turned off one by one. The cleaners arrive, the doors are locked, and the city outside continues with its noise and movement. Tomorrow morning at nine o'clock the doors will open again, and the first readers, who have been waiting on the steps, will walk in and find their favourite places by the windows.`;

let cached: WordPieceVocabulary | undefined;

/** The WordPiece vocabulary; built on first use (a few milliseconds) and then reused. */
export function wordPieceVocabulary(): WordPieceVocabulary {
  cached ??= buildVocabulary();
  return cached;
}

function buildVocabulary(): WordPieceVocabulary {
  const characters = printableAsciiCharacters();
  const learned = learnPieces(TRAINING_TEXT, MERGE_COUNT);
  // Learned pieces are at least two characters long, so they never repeat a character token, but
  // two merges can spell the same piece ("ab ##c", "a ##bc"); a piece is listed once.
  const normalPieces = [...new Set([...characters, ...characters.map((character) => CONTINUATION + character), ...learned])];
  const pieces = [...SPECIAL_TOKENS, ...normalPieces];
  const tokenTypes = [...SPECIAL_TOKENS.map(() => TokenType.control), ...normalPieces.map(() => TokenType.normal)];
  const idOf = (piece: (typeof SPECIAL_TOKENS)[number]): number => pieces.indexOf(piece);
  return {
    model: "bert",
    pieces,
    tokens: pieces.map((piece, id) => toPhantomSpace(piece, tokenTypes[id] ?? TokenType.normal)),
    tokenTypes,
    padId: idOf("[PAD]"),
    unkId: idOf("[UNK]"),
    clsId: idOf("[CLS]"),
    sepId: idOf("[SEP]"),
    maskId: idOf("[MASK]"),
  };
}

/** convert_hf_to_gguf.py's BertModel.set_vocab `phantom`: WordPiece spelling to llama.cpp's. */
function toPhantomSpace(piece: string, tokenType: number): string {
  if (tokenType === TokenType.control) return piece;
  if (piece.startsWith(CONTINUATION)) return piece.slice(CONTINUATION.length);
  return WORD_START + piece;
}

/** "!" to "~" (space is never part of a word), without "A" to "Z". */
function printableAsciiCharacters(): string[] {
  const characters: string[] = [];
  for (let code = 0x21; code <= 0x7e; code++) {
    const character = String.fromCharCode(code);
    if (character < "A" || character > "Z") characters.push(character);
  }
  return characters;
}

/**
 * The words of the text as llama.cpp's WordPiece pre-tokenizer sees them (for ASCII text):
 * lower-cased, split on whitespace, with each punctuation mark or symbol a word of its own.
 */
function preTokenize(text: string): string[] {
  return text.toLowerCase().match(/[a-z0-9]+|[^\sa-z0-9]/g) ?? [];
}

/**
 * WordPiece training as Hugging Face's WordPieceTrainer does it: each word starts as its first
 * character followed by "##"-marked characters, and the most frequent adjacent pair of symbols is
 * merged repeatedly (ties broken by the pair's text, so the result is deterministic), giving
 * "th", then "the", "##in", "##ing"... Stops early if no pair occurs twice. Returns the merged
 * pieces in the order they were learned.
 */
function learnPieces(text: string, count: number): string[] {
  const wordCounts = new Map<string, number>();
  for (const word of preTokenize(text)) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
  const words = [...wordCounts].map(([word, frequency]) => ({
    symbols: [...word].map((character, i) => (i === 0 ? character : CONTINUATION + character)),
    frequency,
  }));

  return trainPairMerges(words, count, joinPieces).map(([left, right]) => joinPieces(left, right));
}

/** "th" + "##e" is "the"; "##in" + "##g" is "##ing". The right symbol always continues a word. */
function joinPieces(left: string, right: string): string {
  return left + right.slice(CONTINUATION.length);
}
