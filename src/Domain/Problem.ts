import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema, Struct } from "effect"

/**
 * D1: every client-visible error is a `Schema.TaggedError` with a status
 * annotation; on the wire it is an RFC 9457 problem document. The stable
 * `code` is the tag in snake case (`VersionConflict` -> `version_conflict`),
 * so a code is declared once, by naming the error.
 */
export interface ProblemSource<A extends { readonly _tag: string }, I> extends Schema.Schema<A, I> {
  readonly _tag: string
  readonly fields: Schema.Struct.Fields
}

export interface ProblemHead {
  readonly type: "about:blank"
  readonly title: string
  readonly status: number
  readonly code: string
}

/** Errors that need response headers (`Retry-After`, `WWW-Authenticate`) say so here. */
export interface WithResponseHeaders {
  readonly responseHeaders: Readonly<Record<string, string>>
}

export const hasResponseHeaders = (u: unknown): u is WithResponseHeaders =>
  typeof u === "object" && u !== null && "responseHeaders" in u

const reasonPhrases: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable"
}

export const problemCode = (tag: string): string => tag.replace(/(?<!^)([A-Z])/g, "_$1").toLowerCase()

const cache = new WeakMap<object, Schema.Schema.Any>()

/**
 * The wire schema of an error: its fields (encoded) under the problem head.
 * Endpoints list errors through this, so the OpenAPI document and typed
 * clients see exactly the body the server sends.
 */
export const problem = <A extends { readonly _tag: string }, I extends { readonly _tag: string }>(
  error: ProblemSource<A, I>
): Schema.Schema<A, ProblemHead & Omit<I, "_tag">> => {
  const cached = cache.get(error)
  if (cached !== undefined) return cached as unknown as Schema.Schema<A, ProblemHead & Omit<I, "_tag">>
  const status = HttpApiSchema.getStatusError(error)
  const head: ProblemHead = {
    type: "about:blank",
    title: reasonPhrases[status] ?? "Error",
    status,
    code: problemCode(error._tag)
  }
  const wire = Schema.Struct({
    type: Schema.Literal(head.type),
    title: Schema.Literal(head.title),
    status: Schema.Literal(head.status),
    code: Schema.Literal(head.code)
  }).pipe(Schema.extend(Schema.encodedSchema(Schema.Struct(Struct.omit(error.fields, "_tag")))))
  const schema = Schema.transform(wire, error, {
    strict: false,
    decode: ({ type, title, status, code, ...fields }) => ({ ...fields, _tag: error._tag }),
    encode: ({ _tag, ...fields }) => ({ ...head, ...fields })
  }).annotations({
    ...HttpApiSchema.annotations({ status }),
    identifier: `${error._tag}Problem`,
    description: `${status} ${head.code}`
  })
  cache.set(error, schema)
  return schema as unknown as Schema.Schema<A, ProblemHead & Omit<I, "_tag">>
}
