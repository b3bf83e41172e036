// The issue-29 acceptance schema: a realistic zod 4 object whose JSON Schema (z.toJSONSchema)
// uses what zod writes for .int(), .positive(), z.email(), z.uuid(), z.iso.date(),
// z.iso.datetime(), enums, optional fields and arrays with .min(1).
import { z } from "zod";

export const zodPerson = z.object({
  id: z.uuid(),
  name: z.string().min(1).max(12),
  age: z.int().nonnegative().max(130),
  email: z.email(),
  born: z.iso.date(),
  seen: z.iso.datetime().optional(),
  role: z.enum(["admin", "user", "guest"]),
  nickname: z.string().max(8).optional(),
  visits: z.int().positive(),
  pets: z
    .array(z.object({ kind: z.enum(["cat", "dog"]), age: z.int().min(0).max(30), tag: z.string().regex(/^[A-Z]{2}-\d{3}$/) }))
    .min(1)
    .max(2),
});

export const zodPersonJsonSchema = z.toJSONSchema(zodPerson) as Record<string, unknown>;
