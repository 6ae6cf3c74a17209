import { problemCode } from "./Domain/Problem.js"

// The OpenAPI document's finish: what the framework generates from the contract
// (`src/Api.ts`), told the way the service answers (D9).

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null

const problemCodeOf = (reference: unknown): string | undefined => {
  const name = isObject(reference) && typeof reference.$ref === "string" ? reference.$ref.split("/").pop() : undefined
  return name?.endsWith("Problem") === true ? problemCode(name.slice(0, -"Problem".length)) : undefined
}

const header = (description: string, schema: Json = { type: "string" }) => ({ description, schema })

/** The headers an answer of this status may carry, besides `X-Request-Id` on every one. */
const headersFor = (status: number, codes: ReadonlyArray<string>, replays: boolean): Json => ({
  "X-Request-Id": header("The request's id, as in the logs: the caller's own when it sent a plain one."),
  ...(status === 401 ? { "WWW-Authenticate": header("Bearer: sign in again.") } : {}),
  ...(status === 405 ? { Allow: header("The methods this path takes.") } : {}),
  ...(status === 429 || status === 503 || codes.includes("idempotency_in_progress")
    ? { "Retry-After": header("Seconds to wait before sending the request again.", { type: "integer", minimum: 1 }) }
    : {}),
  ...(status === 200 && replays
    ? {
      "Idempotent-Replayed": header(
        "true when this is the stored answer of an earlier request with the same idempotency_key."
      )
    }
    : {})
})

/**
 * Whether an operation answers a retry with its first success (D6): those whose
 * body carries an `idempotency_key`, and only those, send `Idempotent-Replayed`.
 */
const replaysRetries = (operation: Json, schemas: Json): boolean => {
  const content = isObject(operation.requestBody) && isObject(operation.requestBody.content)
    ? operation.requestBody.content["application/json"]
    : undefined
  const schema = isObject(content) && isObject(content.schema) ? content.schema : {}
  const named = typeof schema.$ref === "string" ? schemas[schema.$ref.split("/").pop() ?? ""] : schema
  return isObject(named) && isObject(named.properties) && "idempotency_key" in named.properties
}

/** Replaces every `{"$ref": …/name}` in the document with `inline`, keeping what stands beside the reference. */
const inlineSchema = (node: unknown, name: string, inline: Json): unknown => {
  if (Array.isArray(node)) return node.map((item) => inlineSchema(item, name, inline))
  if (!isObject(node)) return node
  if (node.$ref === `#/components/schemas/${name}`) {
    const { $ref: _, ...beside } = node
    return { ...inline, ...beside }
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inlineSchema(value, name, inline)]))
}

/** Examples a person (and Swagger UI) can read, instead of what a pattern generates. */
const EXAMPLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  UsdAmount: ["25.50"],
  PositiveUsdAmount: ["10"],
  Usd: ["25.500000"],
  IdempotencyKey: ["3f1c9a2e-budget-q3"]
}

/**
 * The document as client generators need it. The framework documents its own
 * decode error (400) on every endpoint; ours answer those with 422
 * `validation_failed` instead, and send every error as
 * `application/problem+json`. Each response lists the headers it may carry,
 * and a status several errors share names their codes. Effect's internal
 * schemas (the decode error's issues, `Int`, `DateTimeUtc`) become plain
 * JSON Schema.
 */
export const polish = (document: Json): Json => {
  const schemas = isObject(document.components) && isObject(document.components.schemas)
    ? document.components.schemas
    : {}
  for (const path of Object.values(isObject(document.paths) ? document.paths : {})) {
    for (const operation of Object.values(isObject(path) ? path : {})) {
      if (!isObject(operation) || !isObject(operation.responses)) continue
      const responses = operation.responses
      delete responses["400"]
      for (const [status, response] of Object.entries(responses)) {
        if (!isObject(response)) continue
        let codes: Array<string> = []
        if (Number(status) >= 400 && isObject(response.content)) {
          const json = response.content["application/json"]
          if (json !== undefined) response.content = { "application/problem+json": json }
          const schema = isObject(json) && isObject(json.schema) ? json.schema : {}
          codes = (Array.isArray(schema.anyOf) ? schema.anyOf : [schema]).flatMap((reference) =>
            problemCodeOf(reference) ?? []
          )
          if (codes.length > 1) response.description = `${status} ${codes.join(", ")}`
        }
        response.headers = headersFor(Number(status), codes, replaysRetries(operation, schemas))
      }
    }
    for (const operation of Object.values(isObject(path) ? path : {})) {
      for (const parameter of isObject(operation) && Array.isArray(operation.parameters) ? operation.parameters : []) {
        // A query parameter travels as text; what it holds is an integer.
        if (isObject(parameter) && parameter.name === "limit") {
          parameter.schema = { type: "integer", minimum: 1, maximum: 500, default: 100 }
        }
      }
    }
  }
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete schemas[name]
  for (const [name, examples] of Object.entries(EXAMPLES)) {
    const schema = schemas[name]
    if (isObject(schema)) schema.examples = examples
  }
  schemas.DateTimeUtc = {
    type: "string",
    format: "date-time",
    description: "an ISO 8601 timestamp, UTC",
    examples: ["2026-11-24T13:00:00.000Z"]
  }
  delete schemas.Int
  // Groups documented under one tag (the wallet's and the sessions view's) list it once.
  if (Array.isArray(document.tags)) {
    document.tags = document.tags.filter((tag, i, tags) =>
      tags.findIndex((other) => isObject(other) && isObject(tag) && other.name === tag.name) === i
    )
  }
  return {
    ...inlineSchema(document, "Int", { type: "integer" }) as Json,
    servers: [{ url: "/", description: "the server that serves this document" }]
  }
}
