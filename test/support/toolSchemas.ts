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

/** A function whose arguments the grammar fills in alone (every value forced): a call's arguments are known, `{"city": "Paris"}`. */
export const forcedWeatherTool = {
  name: "get_weather",
  description: "Get the current weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris"] } },
    required: ["city"],
    additionalProperties: false,
  },
};
