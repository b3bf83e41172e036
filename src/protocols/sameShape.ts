// Compile-time checks that a response's zod schema (for GET /openapi.json and the tests that
// validate recorded responses) and the interface its translator is typed by are the same shape.

/** The type written out as plain objects at every depth: intersections merged, `readonly` dropped, `?` kept. */
type Plain<T> = T extends object ? { -readonly [K in keyof T]: Plain<T[K]> } : T;

/** true only when A and B are identical types (the compiler's own identity, not assignability). */
type Identical<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/**
 * true when the two types have the same fields, each required or optional alike, at every depth.
 * Assignability both ways is not enough: `{ a: string }` and `{ a: string; b?: string }` are each
 * assignable to the other, so a field one side has as optional would go unnoticed.
 */
export type Same<A, B> = Identical<Plain<A>, Plain<B>>;

/** `same<Same<z.infer<typeof schema>, Interface>>(true)` compiles only when the two agree. */
export const same = <T extends true>(value: T): T => value;

// The checks check: a field missing on one side, optional or not, is a difference.
same<Same<{ a: string }, { a: string }>>(true);
same<Same<{ a: string; b?: string | undefined }, { a: string } & { b?: string }>>(true);
same<Same<{ a: string }, { a: string; b?: string }> extends false ? true : false>(true);
same<Same<{ a: { b?: string } }, { a: { b: string } }> extends false ? true : false>(true);
