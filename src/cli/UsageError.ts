import { CodedError } from "../core/CodedError.js";

/** A mistake in how a command was called; printed without a stack trace, exit code 2. */
export class UsageError extends CodedError<"invalid_arguments"> {
  override name = "UsageError";
  readonly code = "invalid_arguments";
}
