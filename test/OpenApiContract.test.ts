import type { HttpClient } from "@effect/platform/HttpClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { createRepository, DEFAULTS, putAccountPolicy } from "./support/policies.js"
import { admits, bodyVariants, type Json, leafCandidates, resolve } from "./support/SchemaBounds.js"
import { call, createUser, PASSWORD, type Reply, signedInUser, TestApp } from "./support/TestApp.js"

/**
 * The OpenAPI document held to the service (D9): every operation of
 * /openapi.json is sent requests, and what comes back is compared with what the
 * document says. Headers: every documented header that an answer carries is
 * documented for that operation and status; `Idempotent-Replayed` comes back on
 * a retry exactly where it is documented; `WWW-Authenticate` on every 401,
 * `Allow` on every 405, `X-Request-Id` on every answer. Request schemas: values
 * at and just past every bound the document states (pattern quantifiers,
 * lengths, minimum and maximum, enums, required and unknown fields, types) are
 * accepted exactly when the document admits them; a refusal is 422
 * `validation_failed` naming the field.
 */

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

interface Operation {
  readonly method: Method
  readonly path: string
  readonly spec: Json
}

interface Fixture {
  readonly token?: string
  readonly path?: string
  readonly body?: Json
  readonly headers?: Readonly<Record<string, string>>
  /** Run before every request of the operation: puts the account back where the base request succeeds. */
  readonly before?: Effect.Effect<void, never, HttpClient>
  /**
   * Fields whose rule depends on what the document cannot state (the account's own rows, the
   * clock), each with why: a value the document admits may still be refused with 422 at that
   * field, and only there. A value the document refuses must be refused there as everywhere.
   */
  readonly contextual?: Readonly<Record<string, string>>
}

interface Sent {
  readonly operation: Operation
  readonly reply: Reply
}

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const operationsOf = (document: Json): ReadonlyArray<Operation> =>
  Object.entries(isObject(document.paths) ? document.paths : {}).flatMap(([path, item]) =>
    Object.entries(isObject(item) ? item : {}).flatMap(([method, spec]) =>
      isObject(spec) ? [{ method: method.toUpperCase() as Method, path, spec }] : []
    )
  )

const keyOf = (operation: Operation) => `${operation.method} ${operation.path}`

const responseOf = (operation: Operation, status: number): Json | undefined => {
  const responses = isObject(operation.spec.responses) ? operation.spec.responses : {}
  const response = responses[String(status)]
  return isObject(response) ? response : undefined
}

const documentedHeaders = (operation: Operation, status: number): ReadonlyArray<string> => {
  const headers = responseOf(operation, status)?.headers
  return Object.keys(isObject(headers) ? headers : {}).map((name) => name.toLowerCase())
}

const requestSchemaOf = (operation: Operation): unknown => {
  const body = operation.spec.requestBody
  const content = isObject(body) && isObject(body.content) ? body.content["application/json"] : undefined
  return isObject(content) ? content.schema : undefined
}

const queryParametersOf = (operation: Operation): ReadonlyArray<Json> =>
  (Array.isArray(operation.spec.parameters) ? operation.spec.parameters : []).filter((parameter): parameter is Json =>
    isObject(parameter) && parameter.in === "query"
  )

const fresh = (body: Json | undefined): Json | undefined =>
  body !== undefined && "idempotency_key" in body ? { ...body, idempotency_key: randomUUID() } : body

const withQuery = (path: string, query: Record<string, string>) => {
  const search = new URLSearchParams(query).toString()
  return search === "" ? path : `${path}?${search}`
}

/** A query parameter travels as text: the document's integer admits "500". */
const asQueryValue = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value)
const fromQueryValue = (schema: Json, text: string): unknown =>
  (schema.type === "integer" || schema.type === "number") && /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text

const pointersOf = (reply: Reply): ReadonlyArray<string> =>
  isObject(reply.body) && Array.isArray(reply.body.errors)
    ? reply.body.errors.flatMap((error) => isObject(error) && typeof error.pointer === "string" ? [error.pointer] : [])
    : []

const isValidationRefusal = (reply: Reply) =>
  reply.status === 422 && isObject(reply.body) && reply.body.code === "validation_failed"

/** What differs between an answer and the document, for one operation: undocumented status or header. */
const headerFindings = (document: Json, sent: ReadonlyArray<Sent>): ReadonlyArray<string> => {
  const named = new Set(
    operationsOf(document).flatMap((operation) =>
      Object.keys(isObject(operation.spec.responses) ? operation.spec.responses : {}).flatMap((status) =>
        documentedHeaders(operation, Number(status))
      )
    )
  )
  return sent.flatMap(({ operation, reply }) => {
    const where = `${keyOf(operation)} ${reply.status}`
    if (responseOf(operation, reply.status) === undefined) return [`${where}: status not documented`]
    const documented = documentedHeaders(operation, reply.status)
    return [
      ...Object.keys(reply.headers).filter((name) => named.has(name) && !documented.includes(name)).map((name) =>
        `${where}: sends ${name}, not documented there`
      ),
      ...(reply.headers["x-request-id"] === undefined ? [`${where}: no x-request-id`] : [])
    ]
  })
}

layer(TestApp(), { excludeTestServices: true, timeout: "240 seconds" })(
  "the OpenAPI document against the service",
  (it) => {
    /** Users, a repository and base requests that succeed, one account per writing operation. */
    const arrange = Effect.gen(function*() {
      const document = (yield* call("GET", "/openapi.json")).body as Json
      const reader = yield* signedInUser()
      const leaving = yield* signedInUser()
      const login = yield* createUser()
      const policyWriter = yield* signedInUser()
      const overrideWriter = yield* signedInUser()
      const budgetWriter = yield* signedInUser()
      const creditor = yield* signedInUser({ admin: true })
      const limiter = yield* signedInUser({ admin: true })
      const alertsWriter = yield* signedInUser({ admin: true })
      const webhooksAdmin = yield* signedInUser({ admin: true })
      const endpointOf = (url: string) =>
        Effect.map(
          call("POST", "/developer/account/webhooks", { token: webhooksAdmin.token, body: { url } }),
          (reply) => {
            expect(reply.status).toBe(201)
            return isObject(reply.body) ? String(reply.body.id) : ""
          }
        )
      const endpoint = yield* endpointOf("https://example.com/kept")
      const doomed = yield* endpointOf("https://example.com/deleted")
      const credited = yield* call("POST", "/developer/account/wallet/credits", {
        token: webhooksAdmin.token,
        body: { amount_usd: "1", idempotency_key: randomUUID() }
      })
      const eventPage = yield* call("GET", "/developer/account/events", { token: webhooksAdmin.token })
      expect(credited.status).toBe(200)
      const grantId = isObject(credited.body) && isObject(credited.body.grant) ? String(credited.body.grant.id) : ""
      const eventId =
        isObject(eventPage.body) && Array.isArray(eventPage.body.events) && isObject(eventPage.body.events[0])
          ? String(eventPage.body.events[0].id)
          : ""
      // The account's ceiling at its highest, so that every delivery value the document admits is allowed.
      const policy = { ...DEFAULTS, autonomy_ceiling: "pull_request" }
      expect((yield* putAccountPolicy(overrideWriter.token, policy)).status).toBe(200)
      const repository = yield* createRepository(overrideWriter.id)
      // Raise requests (D22): a spend limit of the smallest amount, so that every amount the document
      // admits is above it, and one request each to approve and to decline.
      const raiser = yield* signedInUser({ admin: true })
      const raised = yield* call("PUT", "/developer/account/limits", {
        token: raiser.token,
        body: { limits: [{ scope: "account", period: "month", amount_usd: "0.000001" }] }
      })
      expect(raised.status).toBe(200)
      const limitId = isObject(raised.body) && Array.isArray(raised.body.limits) && isObject(raised.body.limits[0])
        ? String(raised.body.limits[0].id)
        : ""
      const raiseRequest = {
        limit_id: limitId,
        amount_usd: "999999999999.999999",
        until: new Date(Date.now() + 30 * 86_400_000).toISOString(),
        reason: "a week of load tests"
      }
      const requestOf = Effect.map(
        call("POST", "/developer/account/limits/raise-requests", { token: raiser.token, body: raiseRequest }),
        (reply) => {
          expect(reply.status).toBe(201)
          return isObject(reply.body) ? String(reply.body.id) : ""
        }
      )
      const toApprove = yield* requestOf
      const toDecline = yield* requestOf
      const fixtures: Record<string, Fixture> = {
        "GET /healthz": {},
        "GET /readyz": {},
        "GET /metrics": {},
        "POST /auth/login": { body: { email: login.email, password: PASSWORD } },
        "GET /auth/me": { token: reader.token },
        "POST /auth/logout": { token: leaving.token },
        "GET /developer/account/capabilities": { token: reader.token },
        "GET /developer/account/policy": { token: reader.token },
        "PUT /developer/account/policy": { token: policyWriter.token, body: { policy } },
        "GET /developer/account/repositories/{repository_id}/policy": {
          token: overrideWriter.token,
          path: `/developer/account/repositories/${repository}/policy`
        },
        "PUT /developer/account/repositories/{repository_id}/policy": {
          token: overrideWriter.token,
          path: `/developer/account/repositories/${repository}/policy`,
          body: { policy: {} }
        },
        "GET /developer/account/wallet": { token: reader.token },
        "PUT /developer/account/wallet": {
          token: budgetWriter.token,
          body: { budget_usd: "10", idempotency_key: randomUUID() }
        },
        "POST /developer/account/wallet/credits": {
          token: creditor.token,
          body: { amount_usd: "10", idempotency_key: randomUUID() },
          // Credits add up: each starts from a budget of zero, so none is refused for the sum. Each is a
          // grant (D21), which a budget cannot be set below: the earlier ones are voided.
          before: Effect.gen(function*() {
            const live = yield* call("GET", "/developer/account/wallet/grants", { token: creditor.token })
            const grants = isObject(live.body) && Array.isArray(live.body.grants) ? live.body.grants : []
            for (const grant of grants) {
              const id = isObject(grant) ? String(grant.id) : ""
              const voided = yield* call("POST", `/developer/account/wallet/grants/${id}/void`, {
                token: creditor.token,
                body: { idempotency_key: randomUUID() }
              })
              expect(voided.status).toBe(200)
            }
          })
        },
        "GET /developer/account/wallet/grants": { token: reader.token },
        // The first void ends the grant; a retry replays it, any other is 409 grant_not_live (no 422).
        "POST /developer/account/wallet/grants/{id}/void": {
          token: webhooksAdmin.token,
          path: `/developer/account/wallet/grants/${grantId}/void`,
          body: { idempotency_key: randomUUID() }
        },
        "GET /developer/account/wallet/ledger": { token: reader.token },
        "GET /developer/account/wallet/ledger.csv": { token: reader.token },
        // Without a time it is 422 (documented); the bounds walk sends times the document admits and refuses.
        "GET /developer/account/wallet/as-of": { token: reader.token },
        "GET /developer/account/wallet/sessions": { token: reader.token },
        "GET /developer/account/wallet/sessions/{session_id}": {
          token: reader.token,
          path: "/developer/account/wallet/sessions/no-such-session"
        },
        "GET /developer/account/limits": { token: reader.token },
        "GET /developer/account/repositories": { token: reader.token },
        "GET /developer/account/members": { token: reader.token },
        // Sent again without the new version, a save is 409 version_conflict: documented, and no 422.
        "PUT /developer/account/limits": {
          token: limiter.token,
          body: { limits: [{ scope: "account", period: "month", amount_usd: "10" }] }
        },
        "GET /developer/account/spend": { token: reader.token },
        "GET /developer/account/settings": { token: reader.token },
        // As the limits': sent again without the new version, a save is 409 version_conflict.
        "PUT /developer/account/settings": {
          token: limiter.token,
          body: { timezone: "Europe/Berlin", week_start: "sunday" },
          contextual: { "#/timezone": "a string that names no IANA time zone" }
        },
        "GET /developer/account/limits/effective": {
          token: reader.token,
          contextual: {
            "#/query/user_id": "a UUID that names no user of the account",
            "#/query/repository_id": "a UUID that names no repository of the account"
          }
        },
        "POST /developer/account/limits/raise-requests": {
          token: raiser.token,
          body: { ...raiseRequest, amount_usd: "10" },
          contextual: {
            "#/limit_id": "a UUID that names no spend limit of the account",
            "#/until": "a date-time not within the next 90 days"
          }
        },
        "GET /developer/account/limits/raise-requests": { token: raiser.token },
        // The first approval (and decline) decides the request; every later one is 409 raise_request_decided.
        "POST /developer/account/limits/raise-requests/{id}/approve": {
          token: raiser.token,
          path: `/developer/account/limits/raise-requests/${toApprove}/approve`
        },
        "POST /developer/account/limits/raise-requests/{id}/decline": {
          token: raiser.token,
          path: `/developer/account/limits/raise-requests/${toDecline}/decline`
        },
        "GET /developer/account/alerts": { token: reader.token },
        "PUT /developer/account/alerts": {
          token: alertsWriter.token,
          // The first write saves version 1; later ones with the same (omitted) version are 409, never 422.
          body: { thresholds: [{ amount_usd: "10" }, { percent_of_budget: 5 }] }
        },
        "GET /developer/account/events": { token: reader.token },
        // An account holds ten endpoints: later creations are 409 webhook_limit_reached, documented, never 422.
        "POST /developer/account/webhooks": {
          token: webhooksAdmin.token,
          body: { url: "https://example.com/hook", types: ["wallet.credit_added"], description: "books" }
        },
        "GET /developer/account/webhooks": { token: webhooksAdmin.token },
        "GET /developer/account/webhooks/{id}": {
          token: webhooksAdmin.token,
          path: `/developer/account/webhooks/${endpoint}`
        },
        "PATCH /developer/account/webhooks/{id}": {
          token: webhooksAdmin.token,
          path: `/developer/account/webhooks/${endpoint}`,
          body: { enabled: true }
        },
        "DELETE /developer/account/webhooks/{id}": {
          token: webhooksAdmin.token,
          path: `/developer/account/webhooks/${doomed}`
        },
        "POST /developer/account/webhooks/{id}/rotate-secret": {
          token: webhooksAdmin.token,
          path: `/developer/account/webhooks/${endpoint}/rotate-secret`
        },
        "GET /developer/account/webhooks/{id}/deliveries": {
          token: webhooksAdmin.token,
          path: `/developer/account/webhooks/${endpoint}/deliveries`
        },
        "POST /developer/account/events/{id}/redeliver": {
          token: webhooksAdmin.token,
          path: `/developer/account/events/${eventId}/redeliver`
        },
        // The stream never ends on its own: asked to resume after an event it never had, it answers 404 at once.
        "GET /developer/account/events/stream": {
          token: reader.token,
          headers: { "last-event-id": randomUUID() }
        }
      }
      return { document, fixtures } as const
    })

    const send = (operation: Operation, fixture: Fixture, options: { body?: Json; query?: Record<string, string> }) =>
      Effect.gen(function*() {
        if (fixture.before !== undefined) yield* fixture.before
        const path = withQuery(fixture.path ?? operation.path, options.query ?? {})
        const reply = yield* call(operation.method, path, {
          ...(fixture.token === undefined ? {} : { token: fixture.token }),
          ...(fixture.headers === undefined ? {} : { headers: fixture.headers }),
          ...(options.body === undefined ? {} : { body: options.body })
        })
        return { operation, reply } satisfies Sent
      })

    describe("headers and statuses", () => {
      it.effect("every operation answers with documented statuses and headers, and replays exactly where documented", () =>
        Effect.gen(function*() {
          const { document, fixtures } = yield* arrange
          const operations = operationsOf(document)
          expect(operations.map(keyOf).sort()).toEqual(Object.keys(fixtures).sort())
          const sent: Array<Sent> = []
          const replays: Array<string> = []
          const documentedReplays: Array<string> = []
          for (const operation of operations) {
            const fixture = fixtures[keyOf(operation)] ?? {}
            // The same request twice, as a client retrying it would.
            const body = fixture.body
            const first = yield* send(operation, fixture, body === undefined ? {} : { body })
            const again = yield* send(operation, fixture, body === undefined ? {} : { body })
            sent.push(first, again)
            if (operation.method !== "GET") {
              expect(first.reply.status, keyOf(operation)).toBeLessThan(300)
            }
            if (again.reply.headers["idempotent-replayed"] !== undefined) replays.push(keyOf(operation))
            if (documentedHeaders(operation, 200).includes("idempotent-replayed")) {
              documentedReplays.push(keyOf(operation))
            }
            // Without a token: 401 with WWW-Authenticate where the operation needs one.
            if (Array.isArray(operation.spec.security) && operation.spec.security.length > 0) {
              const { token: _, ...withoutToken } = fixture
              const anonymous = yield* send(operation, withoutToken, body === undefined ? {} : { body })
              expect(anonymous.reply.status, keyOf(operation)).toBe(401)
              expect(anonymous.reply.headers["www-authenticate"], keyOf(operation)).toBe("Bearer")
              expect(documentedHeaders(operation, 401)).toContain("www-authenticate")
              sent.push(anonymous)
            }
            // A method the path does not take: 405 with Allow.
            const taken = operationsOf(document).filter((other) => other.path === operation.path).map((o) => o.method)
            const untaken = (["DELETE", "PUT", "PATCH", "POST"] as const).find((method) => !taken.includes(method))
            const refused = yield* call(untaken ?? "DELETE", fixture.path ?? operation.path, {})
            expect(refused.status, keyOf(operation)).toBe(405)
            expect(refused.headers.allow, keyOf(operation)).toBeDefined()
            expect(documentedHeaders(operation, 405)).toContain("allow")
            sent.push({ operation, reply: refused })
          }
          expect(replays.sort()).toEqual(documentedReplays.sort())
          expect(replays.sort()).toEqual([
            "POST /developer/account/wallet/credits",
            "POST /developer/account/wallet/grants/{id}/void",
            "PUT /developer/account/wallet"
          ])
          expect(headerFindings(document, sent)).toEqual([])
        }))
    })

    describe("request bounds", () => {
      it.effect("the service accepts what the document admits and refuses the rest with 422 at the field", () =>
        Effect.gen(function*() {
          const { document, fixtures } = yield* arrange
          const sent: Array<Sent> = []
          const mismatches: Array<string> = []
          let accepted = 0
          let refused = 0
          const judge = (operation: Operation, label: string, pointer: string, admitted: boolean, reply: Reply) => {
            const refusedHere = isValidationRefusal(reply) && pointersOf(reply).includes(pointer)
            const contextual = fixtures[keyOf(operation)]?.contextual ?? {}
            const refusedByContext = refusedHere && pointersOf(reply).every((at) => at === pointer && at in contextual)
            if (admitted && isValidationRefusal(reply) && !refusedByContext) {
              mismatches.push(`${keyOf(operation)} ${label}: admitted by the document, refused ${pointersOf(reply)}`)
            } else if (!admitted && !refusedHere) {
              mismatches.push(
                `${keyOf(operation)} ${label}: refused by the document, answered ${reply.status} ${pointersOf(reply)}`
              )
            }
            if (admitted) accepted++
            else refused++
          }
          for (const operation of operationsOf(document)) {
            const fixture = fixtures[keyOf(operation)] ?? {}
            const schema = requestSchemaOf(operation)
            if (schema !== undefined) {
              const base = fixture.body ?? {}
              expect(admits(document, schema, base), `${keyOf(operation)}'s base request`).toBe(true)
              for (const variant of bodyVariants(document, schema, base)) {
                const body = variant.pointer === "#/idempotency_key" ? variant.body : fresh(variant.body) ?? {}
                const one = yield* send(operation, fixture, { body })
                sent.push(one)
                judge(operation, variant.label, variant.pointer, admits(document, schema, body), one.reply)
              }
            }
            for (const parameter of queryParametersOf(operation)) {
              const name = String(parameter.name)
              const parameterSchema = resolve(document, parameter.schema)
              for (const candidate of leafCandidates(document, parameterSchema)) {
                const text = asQueryValue(candidate.value)
                const one = yield* send(operation, fixture, { query: { [name]: text } })
                sent.push(one)
                const admitted = admits(document, parameterSchema, fromQueryValue(parameterSchema, text))
                judge(
                  operation,
                  `?${name}=${text.slice(0, 40)} (${candidate.label})`,
                  `#/query/${name}`,
                  admitted,
                  one.reply
                )
              }
            }
          }
          expect(mismatches).toEqual([])
          // A walk over nothing would pass for nothing.
          expect(accepted).toBeGreaterThan(100)
          expect(refused).toBeGreaterThan(100)
          expect(headerFindings(document, sent)).toEqual([])
        }))
    })
  }
)
