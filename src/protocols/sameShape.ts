// Compile-time checks that a response's zod schema (for GET /openapi.json and the tests that
// validate recorded responses) and the interface its translator is typed by are the same shape.

/** true when each type is assignable to the other. */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

/** `same<Same<z.infer<typeof schema>, Interface>>(true)` compiles only when the two agree. */
export const same = <T extends true>(value: T): T => value;
