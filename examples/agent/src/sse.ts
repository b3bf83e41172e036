// Server-sent events framing for text pieces (WHATWG HTML, "Server-sent events").
//
// A parser ends a line at LF, CRLF or a lone CR, appends each `data:` line's value plus LF to the
// event's data, drops one space after the colon, and drops the final LF when the blank line
// dispatches the event. So a piece is written as one `data: ` line per line of it:
// - line feeds survive exactly, and so does a leading space (the one space after `data:` is ours);
// - CR and CRLF arrive as LF: the format has no way to carry them (a parser treats all three as
//   line ends), so that is the most it allows;
// - an empty piece is not sent: EventSource dispatches no event whose data is empty.
// The end of the answer is the event `data: [DONE]`; a piece that is exactly "[DONE]" is sent in
// two parts, so that only the end can read as the end (pieces are arbitrary cuts of one text).

export const DONE = "[DONE]";

/** The bytes of one text piece (empty string for an empty piece). */
export function dataEvent(piece: string): string {
  if (piece === "") return "";
  if (piece === DONE) return dataEvent("[DO") + dataEvent("NE]");
  return frame(piece);
}

/** `event: <name>` with the data; for named events such as `error` and `sources`. */
export function namedEvent(name: string, data: string): string {
  return `event: ${name}\n${frame(data)}`;
}

export const doneEvent = (): string => frame(DONE);

function frame(data: string): string {
  return (
    data
      .split(/\r\n|\r|\n/)
      .map((line) => `data: ${line}\n`)
      .join("") + "\n"
  );
}
