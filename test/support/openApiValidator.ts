import { Ajv2020 } from "ajv/dist/2020.js";
import { expect } from "vitest";

/** The parts of GET /openapi.json the tests read. */
export interface OpenApiDocument {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      { summary: string; requestBody?: { content: { "application/json": { schema: unknown } } }; responses: Record<string, unknown> }
    >
  >;
  components: { schemas: Record<string, object> };
}

/**
 * `expectValid(component, body)`: checks a recorded body against a component of the description
 * (read when called, so the document can be fetched in a beforeAll).
 */
export function validatorOf(documentOf: () => OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  // z.iso.date()'s format; its pattern checks the same.
  ajv.addFormat("date", /^\d{4}-\d{2}-\d{2}$/);
  const expectValid = (component: string, body: unknown) => {
    const schema = documentOf().components.schemas[component];
    expect(schema, `component ${component}`).toBeDefined();
    const validate = ajv.compile(schema!);
    const valid = validate(body);
    expect(valid ? [] : validate.errors, `${component}: ${JSON.stringify(body).slice(0, 300)}`).toEqual([]);
  };
  return { ajv, expectValid };
}
