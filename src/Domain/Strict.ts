import { Effect, ParseResult, Schema } from "effect"
import { ValidationFailed } from "./Errors.js"

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

/**
 * Decodes a request body a handler reads itself (when it must look at one
 * field before validating the rest), failing as the framework's own decoding
 * would: 422 with one JSON Pointer per offending field.
 */
export const decodeRequest = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema, Strict.parseOptions)
  return (input: unknown): Effect.Effect<A, ValidationFailed> =>
    decode(input).pipe(
      Effect.catchTag("ParseError", (error) =>
        Effect.flatMap(ParseResult.ArrayFormatter.formatError(error), (issues) =>
          Effect.fail(ValidationFailed.fromIssues(issues))))
    )
}
