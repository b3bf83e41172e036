import { describe, expect, it } from "vitest";
import {
  ANNOTATION_KEYWORDS,
  MAX_BOUND,
  SUPPORTED_FORMATS,
  UNSUPPORTED_KEYWORDS,
  allowedLiterals,
  allowedTypes,
  findUnsupportedSchemaFeature,
  INTEGER_LIMIT,
  integerRange,
  objectProperties,
  resolveLocalRef,
} from "../../src/core/jsonSchemaSupport.js";

/** A value for each unsupported keyword, as a schema author would write it. */
const UNSUPPORTED_EXAMPLES: Record<string, unknown> = {
  patternProperties: { "^x-": { type: "string" } },
  propertyNames: { maxLength: 3 },
  multipleOf: 2,
  allOf: [{ type: "string" }],
  not: { type: "null" },
  if: { type: "string" },
  then: { maxLength: 3 },
  else: { type: "null" },
  dependentRequired: { a: ["b"] },
  dependentSchemas: { a: { required: ["b"] } },
  dependencies: { a: ["b"] },
  minProperties: 1,
  maxProperties: 3,
  unevaluatedProperties: false,
  uniqueItems: true,
  prefixItems: [{ type: "string" }],
  additionalItems: false,
  unevaluatedItems: false,
  contains: { type: "string" },
  minContains: 1,
  maxContains: 2,
  $dynamicRef: "#node",
  $recursiveRef: "#",
};

const PERSON = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  title: "Person",
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 40, description: "Full name" },
    born: { type: "string", format: "date" },
    email: { type: ["string", "null"], format: "email" },
    role: { enum: ["admin", "user", null], default: "user" },
    tags: { type: "array", items: { type: "string", maxLength: 10 }, minItems: 0, maxItems: 5 },
    score: { anyOf: [{ type: "integer" }, { type: "number" }] },
    note: { type: "string", nullable: true, examples: ["hi"] },
    kind: { const: "person" },
  },
  required: ["name", "kind"],
  additionalProperties: false,
};

const TREE = {
  $ref: "#/$defs/node",
  $defs: {
    node: {
      type: "object",
      properties: { value: { $ref: "#/$defs/value" }, children: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 3 } },
      required: ["value"],
    },
    value: { $ref: "#/$defs/label" },
    label: { enum: ["a", "b"] },
    unused: { pattern: "(?=never checked)" },
  },
};

describe("findUnsupportedSchemaFeature", () => {
  describe("supported schemas", () => {
    it.each([
      ["true", true],
      ["the empty schema", {}],
      ["an object with every supported keyword", PERSON],
      ["nested $defs references, recursive, with unused definitions left unchecked", TREE],
      [
        "draft-07 definitions",
        { definitions: { id: { type: "string", format: "uuid" } }, type: "array", items: { $ref: "#/definitions/id" } },
      ],
      ["a reference to the root", { type: "object", properties: { next: { $ref: "#" } } }],
      [
        "references in JSON Pointer and percent encoding",
        { $defs: { "a/b": { type: "string" }, "c d": { type: "null" } }, anyOf: [{ $ref: "#/$defs/a~1b" }, { $ref: "#/$defs/c%20d" }] },
      ],
      [
        "every supported format",
        { type: "object", properties: Object.fromEntries(SUPPORTED_FORMATS.map((format) => [format, { type: "string", format }])) },
      ],
      [
        "annotations and unknown keywords",
        { ...Object.fromEntries([...ANNOTATION_KEYWORDS].map((keyword) => [keyword, "x"])), "x-order": 1, example: {}, type: "string" },
      ],
      ["a property forbidden with false", { properties: { secret: false, name: { type: "string" } } }],
      ["a required property that properties does not declare", { type: "object", required: ["id"] }],
      ["a $ref beside annotations and $defs", { $ref: "#/$defs/a", description: "d", $defs: { a: { type: "boolean" } } }],
      ["oneOf alternatives of different types", { oneOf: [{ type: "string" }, { type: "integer" }, { type: "null" }] }],
      ["oneOf alternatives with different enum values", { oneOf: [{ enum: ["a", "b"] }, { const: "c" }, { type: "number" }] }],
      [
        "a tagged oneOf, with the tag behind references",
        {
          oneOf: [{ $ref: "#/$defs/cat" }, { $ref: "#/$defs/dog" }],
          $defs: {
            cat: { type: "object", properties: { pet: { const: "cat" } }, required: ["pet"] },
            dog: { type: "object", properties: { pet: { $ref: "#/$defs/dogTag" } }, required: ["pet"] },
            dogTag: { enum: ["dog"] },
          },
        },
      ],
      ["bounds at the limit", { type: "string", minLength: MAX_BOUND, maxLength: MAX_BOUND }],
      ["integer ranges", { type: "array", items: { type: "integer", minimum: -5, exclusiveMaximum: 7.5 } }],
      [
        "draft-04 / OpenAPI 3.0 boolean exclusive bounds",
        { type: "integer", minimum: 0, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false },
      ],
      ["number bounds at or beyond ±(2^53−1)", { type: "number", minimum: -Number.MAX_SAFE_INTEGER, exclusiveMaximum: 1e300 }],
      ["a pattern", { type: "string", pattern: "^(?:[A-Z]{2}|x)-\\d{3,5}(?<suffix>[^\\s])?$" }],
      ["an unanchored pattern with lengths", { type: "string", pattern: "ab+", minLength: 3, maxLength: 6 }],
      ["a format with a pattern and lengths", { type: "string", format: "date", pattern: "^20", maxLength: 10 }],
      ["a pattern with an enum", { enum: ["a1", "b"], pattern: "\\d" }],
      [
        "string keywords on another type, which they do not constrain",
        { type: "integer", pattern: "^a{5}$", maxLength: 2, format: "date" },
      ],
      ["numeric keywords on another type", { type: "string", minimum: 0, exclusiveMaximum: 0.5 }],
    ])("accepts %s", (_, schema) => {
      expect(findUnsupportedSchemaFeature(schema)).toBeUndefined();
    });
  });

  it.each(Object.entries(UNSUPPORTED_EXAMPLES))("reports %s with its path", (keyword, value) => {
    const schema = { type: "object", properties: { list: { type: "array", items: { anyOf: [{ type: "null" }, { [keyword]: value }] } } } };
    expect(findUnsupportedSchemaFeature(schema)).toEqual({
      path: "properties.list.items.anyOf[1]",
      keyword,
      reason: UNSUPPORTED_KEYWORDS.get(keyword),
    });
  });

  it("has an example for every unsupported keyword", () => {
    expect(Object.keys(UNSUPPORTED_EXAMPLES).sort()).toEqual([...UNSUPPORTED_KEYWORDS.keys()].sort());
  });

  it("reports the first feature depth-first, in the order the keywords appear", () => {
    const properties = { a: { properties: { b: { minimum: 1 } } }, c: { pattern: "\\1" } };
    expect(findUnsupportedSchemaFeature({ properties, maxProperties: 2 })).toMatchObject({
      path: "properties.a.properties.b",
      keyword: "minimum",
    });
    expect(findUnsupportedSchemaFeature({ maxProperties: 2, properties })).toMatchObject({ path: "", keyword: "maxProperties" });
  });

  it("brackets names that would be ambiguous after a dot", () => {
    const schema = { properties: { "a.b": { properties: { "zip code": { pattern: "(?!x)" } } } } };
    expect(findUnsupportedSchemaFeature(schema)?.path).toBe('properties["a.b"].properties["zip code"]');
  });

  it("reports a feature of a definition at the definition, where it is first referenced", () => {
    const schema = {
      type: "array",
      items: { $ref: "#/$defs/item" },
      $defs: { item: { type: "object", properties: { sku: { type: "string", format: "uri" } } } },
    };
    expect(findUnsupportedSchemaFeature(schema)).toMatchObject({ path: "$defs.item.properties.sku", keyword: "format" });
  });

  it.each([
    ["type", { type: "text" }],
    ["type", { type: [] }],
    ["nullable", { type: "string", nullable: "yes" }],
    ["enum", { enum: [] }],
    ["enum", { enum: [{ a: 1 }] }],
    ["enum", { enum: [[1]] }],
    ["const", { const: { a: 1 } }],
    ["required", { required: "a" }],
    ["properties", { properties: [] }],
    ["additionalProperties", { additionalProperties: true }],
    ["additionalProperties", { properties: { a: {} }, additionalProperties: { type: "string" } }],
    ["items", { items: [{ type: "string" }] }],
    ["items", { items: false }],
    ["minLength", { minLength: -1 }],
    ["maxLength", { maxLength: 2.5 }],
    ["maxItems", { maxItems: MAX_BOUND + 1 }],
    ["minItems", { minItems: "1" }],
    ["format", { type: "string", format: "uri" }],
    ["format", { type: "string", format: "regex" }],
    ["pattern", { type: "string", pattern: 5 }],
    ["pattern", { type: "string", pattern: "(" }],
    ["pattern", { type: "string", pattern: "^(?!\\.)[a-z]+$" }],
    ["pattern", { type: "string", pattern: "^(?<=a)b$" }],
    ["pattern", { type: "string", pattern: "^(a)\\1$" }],
    ["pattern", { type: "string", pattern: "\\bword\\b" }],
    ["pattern", { type: "string", pattern: "^\\p{L}+$" }],
    ["pattern", { type: "string", pattern: "a^b" }],
    ["pattern", { type: "string", pattern: "^a{2000}$" }],
    ["pattern", { type: "string", pattern: "^🎉$" }],
    ["minimum", { type: "integer", minimum: "0" }],
    ["maximum", { type: "integer", maximum: Number.POSITIVE_INFINITY }],
    ["exclusiveMaximum", { type: "integer", exclusiveMaximum: null }],
    ["anyOf", { anyOf: [] }],
    ["oneOf", { oneOf: [false] }],
    ["anyOf", { anyOf: ["string"] }],
    ["properties", { properties: { a: "string" } }],
    ["$ref", { $ref: "https://example.com/schema.json" }],
    ["$ref", { $ref: "other.json#/$defs/a" }],
    ["$ref", { $ref: "#/$defs/missing", $defs: {} }],
    ["$ref", { $ref: "#/properties/a", properties: { a: {} } }],
    ["$ref", { $ref: "#/$defs/%E0%A4%A", $defs: {} }],
    ["$ref", { $ref: "#/$defs/toString" }],
    ["$ref", { $ref: "#/$defs/nothing", $defs: { nothing: false } }],
  ])("refuses %s in %j", (keyword, schema) => {
    expect(findUnsupportedSchemaFeature(schema)).toMatchObject({ path: "", keyword });
  });

  it("refuses a root that is not a schema", () => {
    for (const schema of [false, null, "object", [], 1]) {
      expect(findUnsupportedSchemaFeature(schema)).toMatchObject({ path: "", keyword: "" });
    }
  });

  describe("keywords that contradict one another or cannot be combined", () => {
    it.each([
      ["type", { $ref: "#/$defs/a", type: "string", $defs: { a: {} } }],
      ["nullable", { $ref: "#/$defs/a", nullable: true, $defs: { a: { type: "string" } } }],
      ["properties", { anyOf: [{ type: "object" }], properties: { a: {} } }],
      ["oneOf", { anyOf: [{ type: "string" }], oneOf: [{ type: "null" }] }],
      ["format", { type: "string", format: "date", maxLength: 9 }],
      ["pattern", { type: "string", format: "uuid", pattern: "^[g-z]+$" }],
      ["pattern", { type: "string", pattern: "^a{3}$", maxLength: 2 }],
      ["minimum", { type: "number", minimum: 0 }],
      ["exclusiveMinimum", { type: "number", exclusiveMinimum: 0 }],
      ["maximum", { type: ["integer", "number"], maximum: 10 }],
      ["minimum", { minimum: 0, maximum: 1 }],
      ["minimum", { type: "integer", minimum: 1e15 }],
      ["exclusiveMinimum", { type: "integer", exclusiveMinimum: 3, maximum: 3 }],
      ["minimum", { type: "integer", minimum: 2.5, maximum: 2.9 }],
      ["enum", { type: "integer", enum: [1, 2], minimum: 3 }],
      ["enum", { type: "string", enum: ["ab", "c1"], pattern: "^[0-9]+$" }],
      ["enum", { type: "string", format: "date", enum: ["2024-01-01"] }],
      ["maxLength", { type: "string", minLength: 5, maxLength: 4 }],
      ["maxItems", { type: "array", minItems: 3, maxItems: 2 }],
      ["required", { properties: { a: false }, required: ["a"] }],
      ["required", { properties: { a: {} }, required: ["b"], additionalProperties: false }],
      ["enum", { type: "string", enum: [1, null] }],
      ["enum", { type: "integer", enum: [1.5] }],
      ["enum", { enum: ["toolong"], maxLength: 3 }],
      ["enum", { enum: ["a"], const: "b" }],
      ["const", { type: "boolean", const: "true" }],
    ])("refuses %s in %j", (keyword, schema) => {
      expect(findUnsupportedSchemaFeature(schema)).toMatchObject({ path: "", keyword });
    });

    it("refuses oneOf alternatives that may match the same value", () => {
      for (const oneOf of [
        [{ type: "string" }, { type: "string", maxLength: 3 }],
        [{ type: "number" }, { type: "integer" }],
        [{ enum: ["a", "b"] }, { enum: ["b", "c"] }],
        [{ enum: ["a"] }, { type: "string" }],
        [{}, { type: "null" }],
        [
          { type: "object", properties: { kind: { const: "a" } }, required: ["kind"] },
          { type: "object", properties: { kind: { enum: ["a", "b"] } }, required: ["kind"] },
        ],
        [
          { type: "object", properties: { kind: { const: "a" } } },
          { type: "object", properties: { kind: { const: "b" } } },
        ],
      ]) {
        expect(findUnsupportedSchemaFeature({ oneOf })).toMatchObject({ path: "", keyword: "oneOf" });
      }
    });
  });

  describe("references", () => {
    it("refuses a cycle through $ref and anyOf alone, which would be left recursion", () => {
      expect(findUnsupportedSchemaFeature({ $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/a" } } })).toMatchObject({
        path: "",
        keyword: "$ref",
      });
      const indirect = {
        properties: { x: { $ref: "#/$defs/a" } },
        $defs: { a: { anyOf: [{ type: "null" }, { $ref: "#/$defs/b" }] }, b: { oneOf: [{ $ref: "#/$defs/a" }] } },
      };
      expect(findUnsupportedSchemaFeature(indirect)).toMatchObject({
        path: "properties.x",
        keyword: "$ref",
        reason: expect.stringContaining("leads back to itself"),
      });
      expect(findUnsupportedSchemaFeature({ anyOf: [{ type: "string" }, { $ref: "#" }] })).toMatchObject({
        path: "anyOf[1]",
        keyword: "$ref",
      });
    });

    it("refuses a recursive schema without finite values", () => {
      const required = { type: "object", properties: { child: { $ref: "#" } }, required: ["child"] };
      expect(findUnsupportedSchemaFeature(required)).toMatchObject({
        path: "properties.child",
        keyword: "$ref",
        reason: expect.stringContaining("no finite value"),
      });
      const nonEmpty = { $ref: "#/$defs/list", $defs: { list: { type: "array", minItems: 1, items: { $ref: "#/$defs/list" } } } };
      expect(findUnsupportedSchemaFeature(nonEmpty)).toMatchObject({ path: "", keyword: "$ref" });
    });

    it("accepts recursion that can stop", () => {
      const optional = { type: "object", properties: { child: { $ref: "#" } } };
      const nullable = { type: ["object", "null"], properties: { child: { $ref: "#" } }, required: ["child"] };
      const leaf = {
        $ref: "#/$defs/t",
        $defs: { t: { anyOf: [{ const: 0 }, { type: "array", minItems: 1, items: { $ref: "#/$defs/t" } }] } },
      };
      for (const schema of [optional, nullable, leaf]) expect(findUnsupportedSchemaFeature(schema)).toBeUndefined();
    });
  });
});

describe("schema readers shared with the grammar converter", () => {
  it("integerRange: the tightest bounds, rounded inwards, within ±(10^15−1)", () => {
    expect(integerRange({ type: "integer", minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })).toEqual({
      min: -INTEGER_LIMIT,
      max: INTEGER_LIMIT,
    });
    expect(integerRange({ exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER })).toEqual({ min: 1, max: INTEGER_LIMIT });
    expect(integerRange({ minimum: 0.5, exclusiveMaximum: 10 })).toEqual({ min: 1, max: 9 });
    expect(integerRange({ minimum: -3, exclusiveMinimum: -2.5, maximum: 7.9, exclusiveMaximum: 8 })).toEqual({ min: -2, max: 7 });
    expect(integerRange({ minimum: 3, exclusiveMinimum: true, maximum: 3, exclusiveMaximum: false })).toEqual({ min: 4, max: 3 });
  });

  it("allowedTypes: type plus nullable, else the types the keywords imply, else any", () => {
    expect(allowedTypes({ type: "string", nullable: true })).toEqual(["string", "null"]);
    expect(allowedTypes({ type: ["integer", "null"], nullable: true })).toEqual(["integer", "null"]);
    expect(allowedTypes({ nullable: true })).toBeUndefined();
    expect(allowedTypes({ properties: {}, maxLength: 3 })).toEqual(["object", "string"]);
    expect(allowedTypes({ description: "x" })).toBeUndefined();
    expect(allowedTypes({ pattern: "a", minimum: 1 })).toEqual(["string", "number"]);
  });

  it("allowedLiterals: enum and const after type, nullable and lengths, without duplicates", () => {
    expect(allowedLiterals({ type: "string" })).toBeUndefined();
    expect(allowedLiterals({ enum: ["a", 1, 1.0, null, "a"], type: ["integer", "string"] })).toEqual(["a", 1]);
    expect(allowedLiterals({ enum: ["a", null], type: "string", nullable: true })).toEqual(["a", null]);
    expect(allowedLiterals({ enum: ["🎉🎉", "abc"], maxLength: 2 })).toEqual(["🎉🎉"]);
    expect(allowedLiterals({ enum: [1, 2], const: 2 })).toEqual([2]);
    expect(allowedLiterals({ enum: [0, 1, 2, 3, "x"], exclusiveMinimum: 0, maximum: 2 })).toEqual([1, 2, "x"]);
    expect(allowedLiterals({ enum: [0, 1], minimum: 0, exclusiveMinimum: true })).toEqual([1]);
    expect(allowedLiterals({ enum: ["a1", "b", 3], pattern: "\\d" })).toEqual(["a1", 3]);
  });

  it("objectProperties: declared in order, then undeclared required ones; undefined for any object", () => {
    expect(objectProperties({ type: "object" })).toBeUndefined();
    expect(objectProperties({ type: "object", additionalProperties: false })).toEqual([]);
    expect(objectProperties({ properties: { b: {}, a: { type: "string" }, gone: false }, required: ["a", "z"] })).toEqual([
      { name: "b", schema: {}, required: false },
      { name: "a", schema: { type: "string" }, required: true },
      { name: "z", schema: true, required: true },
    ]);
  });

  it("resolveLocalRef: only the root and whole definitions", () => {
    const root = { $defs: { a: { type: "null" } }, definitions: { "x~y": true } };
    expect(resolveLocalRef(root, "#")).toEqual({ key: "#", path: "", schema: root });
    expect(resolveLocalRef(root, "#/$defs/a")).toEqual({ key: "$defs/a", name: "a", path: "$defs.a", schema: { type: "null" } });
    expect(resolveLocalRef(root, "#/definitions/x~0y")).toMatchObject({ key: "definitions/x~y", path: 'definitions["x~y"]', schema: true });
    expect(resolveLocalRef(root, "#/$defs/a/type")).toBeUndefined();
    expect(resolveLocalRef(root, "#/$defs/constructor")).toBeUndefined();
  });
});
