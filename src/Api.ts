import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { AuthApi } from "./Auth/Api.js"
import {
  Internal,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType,
  ValidationFailed
} from "./Domain/Errors.js"
import { problem, problemCode } from "./Domain/Problem.js"
import { OperationsApi } from "./Operations/Api.js"
import { PoliciesApi } from "./Policies/Api.js"
import { WalletsApi } from "./Wallets/Api.js"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null

/** The contract's version: the package's (a test holds them equal). */
export const API_VERSION = "0.1.0"

const problemCodeOf = (reference: unknown): string | undefined => {
  const name = isObject(reference) && typeof reference.$ref === "string" ? reference.$ref.split("/").pop() : undefined
  return name?.endsWith("Problem") === true ? problemCode(name.slice(0, -"Problem".length)) : undefined
}

const header = (description: string, schema: Json = { type: "string" }) => ({ description, schema })

/** The headers an answer of this status may carry, besides `X-Request-Id` on every one. */
const headersFor = (status: number, codes: ReadonlyArray<string>, method: string): Json => ({
  "X-Request-Id": header("The request's id, as in the logs: the caller's own when it sent a plain one."),
  ...(status === 401 ? { "WWW-Authenticate": header("Bearer: sign in again.") } : {}),
  ...(status === 405 ? { Allow: header("The methods this path takes.") } : {}),
  ...(status === 429 || status === 503 || codes.includes("idempotency_in_progress")
    ? { "Retry-After": header("Seconds to wait before sending the request again.", { type: "integer", minimum: 1 }) }
    : {}),
  ...(status === 200 && method !== "get"
    ? {
      "Idempotent-Replayed": header(
        "true when this is the stored answer of an earlier request with the same idempotency_key."
      )
    }
    : {})
})

/** Replaces every `{"$ref": …/name}` in the document with `inline`. */
const inlineSchema = (node: unknown, name: string, inline: Json): unknown => {
  if (Array.isArray(node)) return node.map((item) => inlineSchema(item, name, inline))
  if (!isObject(node)) return node
  if (node.$ref === `#/components/schemas/${name}`) return inline
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
const polish = (document: Json): Json => {
  for (const path of Object.values(isObject(document.paths) ? document.paths : {})) {
    for (const [method, operation] of Object.entries(isObject(path) ? path : {})) {
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
        response.headers = headersFor(Number(status), codes, method)
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
  const schemas = isObject(document.components) && isObject(document.components.schemas)
    ? document.components.schemas
    : {}
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
  return {
    ...inlineSchema(document, "Int", { type: "integer" }) as Json,
    servers: [{ url: "/", description: "the server that serves this document" }]
  }
}

/** The whole contract: every group, endpoint, schema and error a client can see. */
export class Api extends HttpApi.make("account-api")
  .add(OperationsApi)
  .add(AuthApi)
  .add(PoliciesApi)
  .add(WalletsApi)
  .addError(problem(ValidationFailed))
  .addError(problem(PayloadTooLarge))
  .addError(problem(UnsupportedMediaType))
  .addError(problem(NotFound))
  .addError(problem(MethodNotAllowed))
  .addError(problem(Internal))
  .annotateContext(OpenApi.annotations({
    title: "Account API",
    version: API_VERSION,
    description: "Sign-in, the account wallet and ledger, and the account autonomy policy.",
    transform: polish
  }))
{}
