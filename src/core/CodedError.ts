/**
 * A failure the user caused or can act on, with a code that names it. Its message is written for
 * people: the server sends it in the protocol's error shape, the CLI prints it without a stack
 * trace and exits with status 2. docs/errors.md documents every code (test/unit/errorsDoc.test.ts
 * keeps it complete). Anything thrown that is not a CodedError is a bug: the server answers 500 and
 * the CLI prints the stack and exits with status 1.
 */
export abstract class CodedError<Code extends string = string> extends Error {
  abstract readonly code: Code;
}
