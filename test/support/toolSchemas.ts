/**
 * A tool's parameters for tests on the random-weights model: grammar-constrained decoding must
 * make any call valid against it; the string is bounded so that random text ends.
 */
export const weatherSchema = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
} as const;
