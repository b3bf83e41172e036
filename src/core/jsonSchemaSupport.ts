// Which JSON Schema features grammar-constrained decoding enforces, shared by the request checks
// (a schema using anything else is refused with HTTP 400) and by the GBNF converter
// (src/engine/jsonSchemaToGbnf.ts), so both read schemas the same way.
//
// The converter's grammar must only ever produce valid instances; it may produce fewer than the
// schema allows (for example only the declared properties of an object, or only upper-case "T"
// in a date-time). A keyword is supported when every value of the grammar satisfies it.
//
// Keyword semantics: JSON Schema 2020-12 (Core and Validation), plus `definitions` (draft-07),
// OpenAPI 3.0's `nullable` and the boolean `exclusiveMinimum` / `exclusiveMaximum` of draft 4 and
// OpenAPI 3.0.
//
// Decisions that follow from "every value of the grammar satisfies every keyword":
// - A `format` beside a `pattern` (zod 4 writes both for z.email(), z.uuid(), z.iso.date(), ...):
//   the strings generated are the intersection of the format's automaton and the pattern's
//   (src/core/stringPattern.ts), so both hold whatever the pattern is. Using the pattern alone
//   would be unsound (zod's z.iso.time() pattern allows "12:00", which is no RFC 3339 time), and
//   the format alone too (zod's z.uuid() pattern wants a version digit 1-8).
// - Numeric ranges: on integers, digit-range rules enforce any bounds. On numbers (decimals, as
//   llama.cpp cannot either) only bounds at or beyond ±(2^53−1) are accepted, which every number
//   generated meets (less than 10^15 in magnitude); narrower ones are refused.

import { countJsonObjects, MAX_SCHEMA_NODES } from "./jsonLimits.js";
import { FORMAT_PATTERNS, parsePattern, PatternError, SHORT_FORMAT_PATTERNS, SHORT_STRING, stringAutomaton } from "./stringPattern.js";
import type { StringAutomaton } from "./stringPattern.js";

/** A schema in object form (a schema can also be `true` or `false`). */
export type SchemaObject = { readonly [keyword: string]: unknown };

export type JsonScalar = string | number | boolean | null;

/** The type names of JSON Schema Validation 2020-12, section 6.1.1. */
const JSON_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"] as const;
export type JsonType = (typeof JSON_TYPES)[number];

/** Keywords the grammar enforces. */
const SUPPORTED_KEYWORDS: ReadonlySet<string> = new Set([
  "type",
  "nullable",
  "enum",
  "const",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "format",
  "pattern",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "anyOf",
  "oneOf",
  "$ref",
]);

/**
 * Keywords that do not constrain instances, ignored. `$defs` / `definitions` only hold schemas
 * for `$ref`. Any keyword in none of these tables is ignored too, as JSON Schema Core 2020-12
 * says in section 6.5 ("Implementations SHOULD treat keywords they do not support as
 * annotations"), so schemas carrying vendor extensions (`x-…`, `example`, `discriminator`, …)
 * still work.
 */
export const ANNOTATION_KEYWORDS: ReadonlySet<string> = new Set([
  "title",
  "description",
  "examples",
  "default",
  "deprecated",
  "readOnly",
  "writeOnly",
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "$vocabulary",
  "$defs",
  "definitions",
  "strict",
]);

/** Keywords that constrain instances in ways the grammar cannot follow, with the reason reported. */
export const UNSUPPORTED_KEYWORDS: ReadonlyMap<string, string> = new Map([
  ["patternProperties", "regular-expression property names cannot be enforced"],
  ["propertyNames", "constraints on property names cannot be enforced"],
  ["multipleOf", "multiples cannot be enforced"],
  ["allOf", "intersections of schemas cannot be enforced; merge them into one schema"],
  ["not", "negated schemas cannot be enforced"],
  ["if", "conditional schemas cannot be enforced"],
  ["then", "conditional schemas cannot be enforced"],
  ["else", "conditional schemas cannot be enforced"],
  ["dependentRequired", "dependencies between properties cannot be enforced"],
  ["dependentSchemas", "dependencies between properties cannot be enforced"],
  ["dependencies", "dependencies between properties cannot be enforced"],
  ["minProperties", "property counts cannot be enforced; use required"],
  ["maxProperties", "property counts cannot be enforced"],
  ["unevaluatedProperties", "unevaluated properties cannot be enforced; use additionalProperties: false"],
  ["uniqueItems", "uniqueness of array items cannot be enforced"],
  ["prefixItems", "tuple schemas are not supported; use items"],
  ["additionalItems", "tuple schemas are not supported; use items"],
  ["unevaluatedItems", "unevaluated items cannot be enforced"],
  ["contains", "contains cannot be enforced"],
  ["minContains", "contains cannot be enforced"],
  ["maxContains", "contains cannot be enforced"],
  ["$dynamicRef", "dynamic references are not supported; use $ref"],
  ["$recursiveRef", "dynamic references are not supported; use $ref"],
]);

/**
 * String formats (JSON Schema Validation 2020-12, section 7.3) whose every generated value is
 * valid: full-date, full-time and date-time of RFC 3339 (days per month and leap years
 * included), RFC 4122 UUIDs, RFC 5321 dot-atom mailboxes, RFC 1123 host names, dotted-quad IPv4.
 */
export const SUPPORTED_FORMATS = ["date", "time", "date-time", "uuid", "email", "hostname", "ipv4"] as const;
export type SupportedFormat = (typeof SUPPORTED_FORMATS)[number];

/**
 * Largest minLength / maxLength / minItems / maxItems accepted. llama.cpp expands a bounded
 * repetition into one rule per repetition, so larger bounds would make very large grammars.
 */
export const MAX_BOUND = 100_000;

/** The largest magnitude of a generated integer: at most 15 digits, so exact in a double. */
export const INTEGER_LIMIT = 10 ** 15 - 1;

/** The numeric range keywords. */
const RANGE_KEYWORDS = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"] as const;

/** The integers a schema's range keywords allow (within ±INTEGER_LIMIT); min > max when none. */
export interface IntegerRange {
  min: number;
  max: number;
}

/** Keywords that apply to one type only; without `type`, their presence implies that type. */
const TYPE_KEYWORDS: readonly (readonly [JsonType, readonly string[]])[] = [
  ["object", ["properties", "required", "additionalProperties"]],
  ["array", ["items", "minItems", "maxItems"]],
  ["string", ["minLength", "maxLength", "format", "pattern"]],
  ["number", RANGE_KEYWORDS],
];

/** Keywords that stand alone: a schema with one of them carries no other supported keyword. */
const EXCLUSIVE_KEYWORDS = ["$ref", "anyOf", "oneOf"] as const;

export interface UnsupportedSchemaFeature {
  /** Where the schema holding `keyword` sits, e.g. `properties.city` or `items.anyOf[1]`; "" is the root. */
  path: string;
  /** The offending keyword of that schema; "" only when the root is not a schema at all. */
  keyword: string;
  /** Short lower-case explanation, e.g. "regular-expression patterns cannot be enforced". */
  reason: string;
}

export interface ObjectProperty {
  name: string;
  schema: SchemaObject | true;
  required: boolean;
}

export interface LocalReference {
  /** Identifies the target: "#" or "<container>/<name>". */
  key: string;
  /** The definition's name; undefined for "#". */
  name?: string;
  /** Where the target sits, in the same notation as UnsupportedSchemaFeature.path. */
  path: string;
  schema: unknown;
}

/**
 * The first feature of `schema` that the grammar cannot enforce, depth-first in the order the
 * keywords appear (a referenced definition is checked where it is first referenced), or
 * undefined when the whole schema is supported. Definitions that are never referenced are not
 * checked.
 */
export function findUnsupportedSchemaFeature(schema: unknown): UnsupportedSchemaFeature | undefined {
  if (schema === true) return undefined;
  if (!isSchemaObject(schema)) return { path: "", keyword: "", reason: notASchema("the root", schema) };
  // The request check and the grammar converter both ask about the same schema object: the
  // answer is computed once.
  if (checked.has(schema)) return checked.get(schema);
  const found =
    countJsonObjects(schema, MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES
      ? { path: "", keyword: "", reason: `the schema is too large: at most ${MAX_SCHEMA_NODES} subschemas (objects) are accepted` }
      : new SupportCheck(schema).run();
  checked.set(schema, found);
  return found;
}

const checked = new WeakMap<object, UnsupportedSchemaFeature | undefined>();

export function isSchemaObject(value: unknown): value is SchemaObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The types a value of the schema may have: `type` (plus "null" when `nullable: true`), else the
 * types implied by type-specific keywords, else undefined for any type.
 */
export function allowedTypes(schema: SchemaObject): readonly JsonType[] | undefined {
  const declared = declaredTypes(schema);
  if (declared) return declared;
  const implied = TYPE_KEYWORDS.filter(([, keywords]) => keywords.some((keyword) => Object.hasOwn(schema, keyword)));
  return implied.length > 0 ? implied.map(([type]) => type) : undefined;
}

/**
 * The values `enum` / `const` allow once the schema's other keywords are applied (`type`,
 * `nullable`, string lengths), without duplicates; undefined when the schema has neither keyword.
 */
export function allowedLiterals(schema: SchemaObject): readonly JsonScalar[] | undefined {
  const hasEnum = Object.hasOwn(schema, "enum");
  const hasConst = Object.hasOwn(schema, "const");
  if (!hasEnum && !hasConst) return undefined;
  const values = (hasEnum ? (schema.enum as JsonScalar[]) : [schema.const as JsonScalar]).filter(
    (value) => !hasConst || value === schema.const,
  );
  const types = declaredTypes(schema);
  const allowed = values.filter(
    (value) =>
      (!types || types.some((type) => hasType(value, type))) &&
      fitsLength(value, schema) &&
      fitsRange(value, schema) &&
      fitsPattern(value, schema),
  );
  return [...new Map(allowed.map((value) => [JSON.stringify(value), value])).values()];
}

/**
 * The properties an object value is generated with, in `properties` order, then required names
 * that `properties` does not declare (any value). A property whose schema is `false` is left
 * out. Undefined means any object: the schema names no properties and allows additional ones.
 */
export function objectProperties(schema: SchemaObject): ObjectProperty[] | undefined {
  const declared = isSchemaObject(schema.properties) ? schema.properties : undefined;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  if (declared === undefined && required.size === 0) return schema.additionalProperties === false ? [] : undefined;
  const properties: ObjectProperty[] = [];
  for (const [name, property] of Object.entries(declared ?? {})) {
    if (property !== false) properties.push({ name, schema: property as SchemaObject | true, required: required.has(name) });
  }
  for (const name of required) {
    if (!declared || !Object.hasOwn(declared, name)) properties.push({ name, schema: true, required: true });
  }
  return properties;
}

/**
 * Resolves "#", "#/$defs/<name>" or "#/definitions/<name>" against the root schema; undefined
 * for any other reference or a missing definition. The fragment is percent-decoded, then read as
 * a JSON Pointer (RFC 6901: "~1" is "/", "~0" is "~").
 */
export function resolveLocalRef(root: unknown, ref: string): LocalReference | undefined {
  if (ref === "#") return { key: "#", path: "", schema: root };
  if (!ref.startsWith("#") || !isSchemaObject(root)) return undefined;
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined; // malformed percent-encoding
  }
  const match = /^\/(\$defs|definitions)\/([^/]*)$/.exec(fragment);
  if (!match) return undefined;
  const container = match[1] as string;
  const name = (match[2] as string).replaceAll("~1", "/").replaceAll("~0", "~");
  const definitions = root[container];
  if (!isSchemaObject(definitions) || !Object.hasOwn(definitions, name)) return undefined;
  return { key: `${container}/${name}`, name, path: appendKey(container, name), schema: definitions[name] };
}

/** The alternatives of an `anyOf` or `oneOf` schema (both are generated as plain alternatives). */
export function alternativesOf(schema: SchemaObject): readonly unknown[] | undefined {
  const alternatives = schema.anyOf ?? schema.oneOf;
  return Array.isArray(alternatives) ? alternatives : undefined;
}

/** Walks one schema, following local references, and keeps what the reference checks need. */
class SupportCheck {
  readonly #root: SchemaObject;
  /** Every `$ref` met, in walk order: where it is and the key of its target. */
  readonly #references: { path: string; key: string }[] = [];
  /** Reference targets by key; each is checked once, where it is first referenced. */
  readonly #targets = new Map<string, unknown>();
  /** oneOf checks: the shapes of reference targets, by key. */
  readonly #shapesByKey = new Map<string, readonly Shape[]>();

  constructor(root: SchemaObject) {
    this.#root = root;
    this.#targets.set("#", root);
  }

  run(): UnsupportedSchemaFeature | undefined {
    return this.#schema(this.#root, "") ?? this.#leftRecursion() ?? this.#infiniteReference();
  }

  #schema(schema: SchemaObject, path: string): UnsupportedSchemaFeature | undefined {
    for (const [keyword, value] of Object.entries(schema)) {
      const found = this.#keyword(keyword, value, path);
      if (found) return found;
    }
    return conflictingKeywords(schema, path) ?? this.#overlappingOneOf(schema, path);
  }

  /** A subschema met under `keyword` of the schema at `path`; `what` names it in a reason. */
  #subschema(value: unknown, at: string, path: string, keyword: string, what: string): UnsupportedSchemaFeature | undefined {
    if (value === true) return undefined;
    if (isSchemaObject(value)) return this.#schema(value, at);
    return { path, keyword, reason: notASchema(what, value) };
  }

  #keyword(keyword: string, value: unknown, path: string): UnsupportedSchemaFeature | undefined {
    const unsupported = UNSUPPORTED_KEYWORDS.get(keyword);
    if (unsupported !== undefined) return { path, keyword, reason: unsupported };
    const invalid = (reason: string) => ({ path, keyword, reason });
    switch (keyword) {
      case "type":
        return isTypeValue(value) ? undefined : invalid(`type must be one of ${JSON_TYPES.join(", ")}, or a non-empty array of them`);
      case "nullable":
        return typeof value === "boolean" ? undefined : invalid("nullable must be true or false");
      case "enum":
        return Array.isArray(value) && value.length > 0 && value.every(isJsonScalar)
          ? undefined
          : invalid("enum must be a non-empty array of strings, numbers, booleans or null");
      case "const":
        return isJsonScalar(value) ? undefined : invalid("const must be a string, number, boolean or null");
      case "properties":
        return this.#properties(value, path);
      case "required":
        return Array.isArray(value) && value.every((name) => typeof name === "string")
          ? undefined
          : invalid("required must be an array of property names");
      case "additionalProperties":
        return value === false
          ? undefined
          : invalid("only the declared properties are generated; set additionalProperties to false or leave it out");
      case "items":
        return Array.isArray(value)
          ? invalid("an array of item schemas (tuple form) is not supported; give one schema")
          : this.#subschema(value, appendKey(path, "items"), path, keyword, "items");
      case "minItems":
      case "maxItems":
      case "minLength":
      case "maxLength":
        return isBound(value) ? undefined : invalid(`${keyword} must be an integer from 0 to ${MAX_BOUND}`);
      case "pattern": {
        const problem = patternProblem(value);
        return problem === undefined ? undefined : invalid(problem);
      }
      case "minimum":
      case "maximum":
        return Number.isFinite(value) ? undefined : invalid(`${keyword} must be a number`);
      case "exclusiveMinimum":
      case "exclusiveMaximum":
        // A number (2020-12, draft 6 and later) or a boolean modifying minimum / maximum (draft 4, OpenAPI 3.0).
        return Number.isFinite(value) || typeof value === "boolean" ? undefined : invalid(`${keyword} must be a number`);
      case "format":
        return SUPPORTED_FORMATS.includes(value as SupportedFormat)
          ? undefined
          : invalid(`format ${JSON.stringify(value)} cannot be enforced; supported formats: ${SUPPORTED_FORMATS.join(", ")}`);
      case "anyOf":
      case "oneOf":
        return this.#alternatives(keyword, value, path);
      case "$ref":
        return this.#reference(value, path);
      default:
        return undefined; // an annotation
    }
  }

  #properties(value: unknown, path: string): UnsupportedSchemaFeature | undefined {
    if (!isSchemaObject(value)) return { path, keyword: "properties", reason: "properties must be an object of schemas" };
    const at = appendKey(path, "properties");
    for (const [name, property] of Object.entries(value)) {
      // `false` forbids the property, and it is never generated; conflictingKeywords catches a required one.
      if (property === false) continue;
      const found = this.#subschema(property, appendKey(at, name), path, "properties", `property ${JSON.stringify(name)}`);
      if (found) return found;
    }
    return undefined;
  }

  #alternatives(keyword: string, value: unknown, path: string): UnsupportedSchemaFeature | undefined {
    if (!Array.isArray(value) || value.length === 0) {
      return { path, keyword, reason: `${keyword} must be a non-empty array of schemas` };
    }
    for (const [index, alternative] of value.entries()) {
      const found = this.#subschema(alternative, `${appendKey(path, keyword)}[${index}]`, path, keyword, `${keyword}[${index}]`);
      if (found) return found;
    }
    return undefined;
  }

  #reference(value: unknown, path: string): UnsupportedSchemaFeature | undefined {
    const target = typeof value === "string" ? resolveLocalRef(this.#root, value) : undefined;
    if (!target) {
      return {
        path,
        keyword: "$ref",
        reason:
          `${JSON.stringify(value)} does not resolve: only "#", "#/$defs/<name>" and "#/definitions/<name>" ` +
          "within this schema are supported",
      };
    }
    this.#references.push({ path, key: target.key });
    if (this.#targets.has(target.key)) return undefined;
    this.#targets.set(target.key, target.schema);
    return this.#subschema(target.schema, target.path, path, "$ref", value as string);
  }

  /**
   * A cycle of references through `$ref` / `anyOf` / `oneOf` alone, with no object or array in
   * between, is left recursion, which llama.cpp refuses (llama_grammar_detect_left_recursion).
   */
  #leftRecursion(): UnsupportedSchemaFeature | undefined {
    const leading = new Map([...this.#targets].map(([key, schema]) => [key, this.#leadingReferences(schema)]));
    const onCycle = (start: string): boolean => {
      const seen = new Set<string>();
      const pending = [...(leading.get(start) ?? [])];
      for (let key = pending.pop(); key !== undefined; key = pending.pop()) {
        if (key === start) return true;
        if (!seen.has(key)) pending.push(...(leading.get(key) ?? []));
        seen.add(key);
      }
      return false;
    };
    const site = this.#references.find(({ key }) => onCycle(key));
    return (
      site && {
        path: site.path,
        keyword: "$ref",
        reason: "the reference leads back to itself through $ref, anyOf or oneOf alone, with no object or array in between",
      }
    );
  }

  /** Keys of the references a value of the schema can start with, before any character is written. */
  #leadingReferences(schema: unknown): string[] {
    if (!isSchemaObject(schema)) return [];
    if (typeof schema.$ref === "string") return [this.#key(schema.$ref)];
    return (alternativesOf(schema) ?? []).flatMap((alternative) => this.#leadingReferences(alternative));
  }

  /**
   * A reference whose target has no finite value: each of its values would have to contain
   * another (a required property or a minimum of items leading back to it), so generation
   * could never end. Computed as the least fixed point of "has a finite value".
   */
  #infiniteReference(): UnsupportedSchemaFeature | undefined {
    const finite = new Set<string>();
    for (let grown = true; grown;) {
      grown = false;
      for (const [key, schema] of this.#targets) {
        if (!finite.has(key) && this.#hasFiniteValue(schema, finite)) {
          finite.add(key);
          grown = true;
        }
      }
    }
    const site = this.#references.find(({ key }) => !finite.has(key));
    return (
      site && {
        path: site.path,
        keyword: "$ref",
        reason: "no finite value matches: every value of the referenced schema would have to contain another one",
      }
    );
  }

  #hasFiniteValue(schema: unknown, finite: ReadonlySet<string>): boolean {
    if (!isSchemaObject(schema)) return schema === true;
    if (typeof schema.$ref === "string") return finite.has(this.#key(schema.$ref));
    const alternatives = alternativesOf(schema);
    if (alternatives) return alternatives.some((alternative) => this.#hasFiniteValue(alternative, finite));
    if (allowedLiterals(schema)) return true;
    return (allowedTypes(schema) ?? JSON_TYPES).some((type) => {
      if (type === "object") {
        return (objectProperties(schema) ?? []).every((property) => !property.required || this.#hasFiniteValue(property.schema, finite));
      }
      if (type === "array") return (schema.minItems ?? 0) === 0 || this.#hasFiniteValue(schema.items ?? true, finite);
      return true;
    });
  }

  /**
   * oneOf accepts a value that matches exactly one alternative, but the grammar generates its
   * alternatives like anyOf's. That is exact only when no value matches two alternatives, which
   * is checked pairwise with a sufficient condition: different types, different enum/const
   * values, or, for objects, a required property with different enum/const values (a tag).
   */
  #overlappingOneOf(schema: SchemaObject, path: string): UnsupportedSchemaFeature | undefined {
    if (!Array.isArray(schema.oneOf)) return undefined;
    const shapes = schema.oneOf.map((alternative) => this.#shapes(alternative));
    for (const [first, firstShapes] of shapes.entries()) {
      for (const [second, secondShapes] of shapes.entries()) {
        if (second > first && firstShapes.some((a) => secondShapes.some((b) => mayOverlap(a, b)))) {
          return {
            path,
            keyword: "oneOf",
            reason:
              `oneOf[${first}] and oneOf[${second}] may match the same value, which oneOf forbids; use anyOf, ` +
              "or make the alternatives differ in type, in enum/const values, or in the enum/const value of a required property",
          };
        }
      }
    }
    return undefined;
  }

  /**
   * What the values of a schema can look like, one shape per alternative. Shapes of reference
   * targets are computed once and shared, so a list never holds the same shape twice and stays
   * as small as the schema.
   */
  #shapes(schema: unknown): readonly Shape[] {
    if (!isSchemaObject(schema)) return [ANY_SHAPE];
    if (typeof schema.$ref === "string") return this.#referencedShapes(this.#key(schema.$ref));
    const alternatives = alternativesOf(schema);
    if (alternatives) return [...new Set(alternatives.flatMap((alternative) => this.#shapes(alternative)))];
    const literals = allowedLiterals(schema);
    if (literals) return [{ types: literals.map(literalType), literals: new Set(literals.map((value) => JSON.stringify(value))) }];
    const types = allowedTypes(schema) ?? JSON_TYPES;
    return [{ types, tags: types.length === 1 && types[0] === "object" ? this.#tags(schema) : undefined }];
  }

  #referencedShapes(key: string): readonly Shape[] {
    const known = this.#shapesByKey.get(key);
    if (known) return known;
    // A reference back to a target whose shapes are being computed could be anything.
    this.#shapesByKey.set(key, [ANY_SHAPE]);
    const shapes = this.#shapes(this.#targets.get(key));
    this.#shapesByKey.set(key, shapes);
    return shapes;
  }

  /** The enum/const values of an object schema's required properties that have them. */
  #tags(schema: SchemaObject): Map<string, ReadonlySet<string>> {
    const tags = new Map<string, ReadonlySet<string>>();
    for (const property of objectProperties(schema) ?? []) {
      const literals = property.required ? this.#literals(property.schema) : undefined;
      if (literals) tags.set(property.name, literals);
    }
    return tags;
  }

  /** JSON texts of a schema's enum/const values, through any chain of references; undefined without them. */
  #literals(schema: unknown): ReadonlySet<string> | undefined {
    const seen = new Set<string>();
    let target = schema;
    while (isSchemaObject(target) && typeof target.$ref === "string") {
      const key = this.#key(target.$ref);
      if (seen.has(key)) return undefined; // a cycle of references, refused later as left recursion
      seen.add(key);
      target = this.#targets.get(key);
    }
    const literals = isSchemaObject(target) ? allowedLiterals(target) : undefined;
    return literals && new Set(literals.map((value) => JSON.stringify(value)));
  }

  /** The key of a reference already checked to resolve. */
  #key(ref: string): string {
    return (resolveLocalRef(this.#root, ref) as LocalReference).key;
  }
}

/** The values of a schema, as far as telling oneOf alternatives apart needs. */
interface Shape {
  types: readonly JsonType[];
  /** JSON texts of the only values allowed (enum / const). */
  literals?: ReadonlySet<string>;
  /** For objects: required properties with enum/const values, and those values. */
  tags?: ReadonlyMap<string, ReadonlySet<string>>;
}

const ANY_SHAPE: Shape = { types: JSON_TYPES };

function mayOverlap(a: Shape, b: Shape): boolean {
  const numeric = (type: JsonType) => type === "number" || type === "integer";
  const sameType = (x: JsonType, y: JsonType) => x === y || (numeric(x) && numeric(y));
  if (!a.types.some((x) => b.types.some((y) => sameType(x, y)))) return false;
  if (a.literals && b.literals) return [...a.literals].some((literal) => b.literals?.has(literal));
  const tags = b.tags;
  if (!a.tags || !tags) return true;
  // Told apart by a tag: a required property of both whose values have nothing in common.
  const disjoint = (name: string, values: ReadonlySet<string>) =>
    tags.has(name) && ![...values].some((value) => tags.get(name)?.has(value));
  return ![...a.tags].some(([name, values]) => disjoint(name, values));
}

function literalType(value: JsonScalar): JsonType {
  return value === null ? "null" : (typeof value as "string" | "number" | "boolean");
}

/**
 * Keywords whose values are each fine but that contradict one another, or that this converter
 * cannot combine. Runs after the keywords themselves were checked, so their values are well-formed.
 */
function conflictingKeywords(schema: SchemaObject, path: string): UnsupportedSchemaFeature | undefined {
  const conflict = (keyword: string, reason: string) => ({ path, keyword, reason });
  const has = (keyword: string) => Object.hasOwn(schema, keyword);
  for (const exclusive of EXCLUSIVE_KEYWORDS.filter(has)) {
    const sibling = Object.keys(schema).find((keyword) => keyword !== exclusive && SUPPORTED_KEYWORDS.has(keyword));
    const target = exclusive === "$ref" ? "the referenced schema" : `each ${exclusive} alternative`;
    if (sibling !== undefined) return conflict(sibling, `cannot be combined with ${exclusive} in one schema; move it into ${target}`);
  }
  if (has("format")) {
    const other = ["enum", "const"].find(has);
    if (other !== undefined) return conflict(other, "cannot be combined with format");
  }
  const literals = has("enum") || has("const");
  const types = allowedTypes(schema) ?? [];
  const range = RANGE_KEYWORDS.find(has);
  if (range !== undefined && !literals) {
    if (types.includes("number") && !isWideRange(schema)) {
      return conflict(
        range,
        "numeric ranges cannot be enforced on non-integer numbers; use type integer, or bounds at or beyond ±(2^53−1), which are met by every generated number",
      );
    }
    const integers = integerRange(schema);
    if (types.includes("integer") && integers.min > integers.max) {
      return conflict(range, `no integer from -${INTEGER_LIMIT} to ${INTEGER_LIMIT} (the integers generated) satisfies the bounds`);
    }
  }
  const exceeds = (min: string, max: string) => has(min) && has(max) && (schema[min] as number) > (schema[max] as number);
  if (exceeds("minLength", "maxLength")) return conflict("maxLength", "is less than minLength, so no string matches");
  if (exceeds("minItems", "maxItems")) return conflict("maxItems", "is less than minItems, so no array matches");
  if (!literals && types.includes("string") && usesStringAutomaton(schema)) {
    try {
      stringAutomatonOf(schema);
    } catch (error) {
      if (!(error instanceof PatternError)) throw error;
      return conflict(has("pattern") ? "pattern" : "format", error.message);
    }
  }
  const missing = impossibleRequiredProperty(schema);
  if (missing) return conflict("required", missing);
  if (allowedLiterals(schema)?.length === 0) {
    return conflict(has("enum") ? "enum" : "const", "no listed value satisfies the other keywords of this schema");
  }
  return undefined;
}

/** Why a required property can never be present, if it cannot. */
function impossibleRequiredProperty(schema: SchemaObject): string | undefined {
  const declared = isSchemaObject(schema.properties) ? schema.properties : {};
  for (const name of Array.isArray(schema.required) ? (schema.required as string[]) : []) {
    const property = `property ${JSON.stringify(name)}`;
    if (Object.hasOwn(declared, name) && declared[name] === false) return `${property} is required but its schema is false`;
    if (!Object.hasOwn(declared, name) && schema.additionalProperties === false) {
      return `${property} is required but not in properties, and additionalProperties is false`;
    }
  }
  return undefined;
}

/**
 * Whether a string schema is generated from an automaton (src/core/stringPattern.ts): it has a
 * pattern, or a format with minLength / maxLength. Otherwise a format has its own grammar rule and
 * lengths are counted repetitions of any character.
 */
export function usesStringAutomaton(schema: SchemaObject): boolean {
  const has = (keyword: string) => Object.hasOwn(schema, keyword);
  return has("pattern") || (has("format") && (has("minLength") || has("maxLength")));
}

const automata = new WeakMap<SchemaObject, StringAutomaton>();

/**
 * The automaton of the strings generated for a schema with a pattern, or a format with lengths:
 * the intersection of the pattern, the format and the lengths, so that every string satisfies all
 * of them. Throws PatternError when that cannot be enforced. Computed once per schema object.
 */
export function stringAutomatonOf(schema: SchemaObject): StringAutomaton {
  let automaton = automata.get(schema);
  if (automaton === undefined) {
    const maxLength = schema.maxLength as number | undefined;
    const formats = maxLength !== undefined && maxLength <= SHORT_STRING ? SHORT_FORMAT_PATTERNS : FORMAT_PATTERNS;
    automaton = stringAutomaton({
      pattern: schema.pattern as string | undefined,
      format: schema.format === undefined ? undefined : formats[schema.format as string],
      minLength: schema.minLength as number | undefined,
      maxLength,
    });
    automata.set(schema, automaton);
  }
  return automaton;
}

/**
 * The integers allowed by minimum / maximum / exclusiveMinimum / exclusiveMaximum (either form),
 * within ±INTEGER_LIMIT: bounds at or beyond it, like zod's ±(2^53−1) for .int(), change nothing.
 */
export function integerRange(schema: SchemaObject): IntegerRange {
  let min = -INTEGER_LIMIT;
  let max = INTEGER_LIMIT;
  for (const { value, exclusive, lower } of numericBounds(schema)) {
    if (lower) min = Math.max(min, exclusive ? Math.floor(value) + 1 : Math.ceil(value));
    else max = Math.min(max, exclusive ? Math.ceil(value) - 1 : Math.floor(value));
  }
  return { min, max };
}

/**
 * Whether every bound is at or beyond ±(2^53−1) in its direction. Such bounds hold for every
 * number generated (less than 10^15 in magnitude, src/engine/jsonSchemaToGbnf.ts), so they are
 * enforced on numbers too; narrower bounds on numbers cannot be.
 */
function isWideRange(schema: SchemaObject): boolean {
  return numericBounds(schema).every(({ value, lower }) => (lower ? value <= -Number.MAX_SAFE_INTEGER : value >= Number.MAX_SAFE_INTEGER));
}

/** Whether the schema has numeric range keywords that bound anything. */
export function hasNumericBounds(schema: SchemaObject): boolean {
  return numericBounds(schema).length > 0;
}

function numericBounds(schema: SchemaObject): { value: number; exclusive: boolean; lower: boolean }[] {
  const bounds: { value: number; exclusive: boolean; lower: boolean }[] = [];
  for (const [keyword, exclusiveKeyword, lower] of [
    ["minimum", "exclusiveMinimum", true],
    ["maximum", "exclusiveMaximum", false],
  ] as const) {
    const inclusive = schema[keyword];
    const exclusive = schema[exclusiveKeyword];
    if (typeof inclusive === "number") bounds.push({ value: inclusive, exclusive: exclusive === true, lower });
    if (typeof exclusive === "number") bounds.push({ value: exclusive, exclusive: true, lower });
  }
  return bounds;
}

function fitsRange(value: JsonScalar, schema: SchemaObject): boolean {
  if (typeof value !== "number") return true;
  return numericBounds(schema).every(({ value: bound, exclusive, lower }) =>
    lower ? (exclusive ? value > bound : value >= bound) : exclusive ? value < bound : value <= bound,
  );
}

/** Whether a string matches the schema's pattern, as a JavaScript regular expression (ECMA-262, as JSON Schema says). */
function fitsPattern(value: JsonScalar, schema: SchemaObject): boolean {
  if (typeof value !== "string" || typeof schema.pattern !== "string") return true;
  return compilePattern(schema.pattern).test(value);
}

function compilePattern(pattern: string): RegExp {
  try {
    return new RegExp(pattern, "u");
  } catch {
    return new RegExp(pattern);
  }
}

/** Why a pattern is refused, if it is. */
function patternProblem(value: unknown): string | undefined {
  if (typeof value !== "string") return "pattern must be a string";
  try {
    compilePattern(value);
  } catch {
    return "pattern is not a valid regular expression";
  }
  try {
    parsePattern(value);
  } catch (error) {
    if (error instanceof PatternError) return `the pattern cannot be enforced: ${error.message}`;
    throw error;
  }
  return undefined;
}

function declaredTypes(schema: SchemaObject): readonly JsonType[] | undefined {
  if (schema.type === undefined) return undefined;
  const types = new Set<JsonType>(typeof schema.type === "string" ? [schema.type as JsonType] : (schema.type as JsonType[]));
  // OpenAPI 3.0: nullable adds null to the types given by `type`, and does nothing without it.
  if (schema.nullable === true) types.add("null");
  return [...types];
}

function hasType(value: JsonScalar, type: JsonType): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "integer":
      return Number.isInteger(value);
    case "object":
    case "array":
      return false;
    default:
      return typeof value === type;
  }
}

/** minLength / maxLength count characters, i.e. code points (Validation 2020-12, section 6.3). */
function fitsLength(value: JsonScalar, schema: SchemaObject): boolean {
  if (typeof value !== "string") return true;
  const length = [...value].length;
  return length >= ((schema.minLength as number | undefined) ?? 0) && length <= ((schema.maxLength as number | undefined) ?? Infinity);
}

function isTypeValue(value: unknown): boolean {
  const isType = (name: unknown) => JSON_TYPES.includes(name as JsonType);
  return isType(value) || (Array.isArray(value) && value.length > 0 && value.every(isType));
}

function isJsonScalar(value: unknown): value is JsonScalar {
  return value === null || typeof value === "string" || typeof value === "boolean" || Number.isFinite(value);
}

function isBound(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_BOUND;
}

function notASchema(what: string, value: unknown): string {
  return value === false ? `${what} is false, which matches no value` : `${what} must be a schema (an object or a boolean)`;
}

/** `path.key`, or `path["key"]` for a key that would be ambiguous after a dot. */
function appendKey(path: string, key: string): string {
  if (!/^[A-Za-z_$][\w$-]*$/.test(key)) return `${path}[${JSON.stringify(key)}]`;
  return path === "" ? key : `${path}.${key}`;
}
