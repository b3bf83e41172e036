/** Text to turn into a model's token ids (llama-server's POST /tokenize). */
export interface TokenizeRequest {
  /** The id or alias the caller asked for. */
  model: string;
  content: string;
  /** Add the tokens the model puts around a prompt (BOS, and for BERT-style models [SEP]). */
  addSpecial: boolean;
  /** Text spelling a special token (`<|im_end|>`) becomes that token rather than its characters. */
  parseSpecial: boolean;
  /** Also return each token's piece: the bytes it stands for. */
  withPieces: boolean;
}

export interface TokenizeResult {
  tokens: number[];
  /** Each token's bytes, in order, when pieces were asked for: they concatenate to the text's UTF-8. */
  pieces?: (readonly number[])[];
}

/** Token ids to turn back into text (llama-server's POST /detokenize). */
export interface DetokenizeRequest {
  model: string;
  tokens: readonly number[];
}

/** The pieces of the tokens, concatenated and read as UTF-8 (bytes that are not valid UTF-8 become U+FFFD). */
export interface DetokenizeResult {
  content: string;
}
