import { Schema } from "effect"

/**
 * Request bodies reject unknown fields (D1) and report every offending field,
 * not just the first.
 */
export const Strict = {
  parseOptions: { onExcessProperty: "error", errors: "all" }
} as const satisfies Schema.Annotations.Schema<unknown>

/**
 * A request body: a struct (parse options on a `Schema.Class` do not reach its
 * fields) that is strict and named for the OpenAPI document.
 */
export const RequestBody = <Fields extends Schema.Struct.Fields>(identifier: string, fields: Fields) =>
  Schema.Struct(fields).annotations({ identifier, ...Strict })
