import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { Credentials } from "../src/Auth/Credentials.js"
import { AppConfig } from "../src/Config.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { DatabaseLive } from "../src/Sql.js"
import { Wallets } from "../src/Wallets.js"
import { freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { createUser, PASSWORD, TestConfig } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D18: with OTEL_EXPORTER_OTLP_ENDPOINT set, the API sends one trace per request over
 * OTLP/HTTP: the server span (route, status) with the request's SQL statements as its
 * children, in the caller's trace when it sent a `traceparent`.
 */

interface OtlpValue {
  readonly stringValue?: string
  readonly intValue?: number | string
}
interface OtlpSpan {
  readonly links?: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }>
}
interface OtlpExport {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

interface Received {
  readonly service: string
  readonly span: OtlpSpan
}

/** A collector of our own: every span posted to `/v1/traces`, with its service's name. */
const collector = Effect.gen(function*() {
  const port = yield* freePort
  const received: Array<Received> = []
  const paths: Array<string> = []
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      paths.push(`${request.method ?? ""} ${request.url ?? ""} ${request.headers["content-type"] ?? ""}`)
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpExport
      for (const resourceSpans of body.resourceSpans) {
        const service = resourceSpans.resource.attributes.find((attribute) => attribute.key === "service.name")
          ?.value.stringValue ?? ""
        for (const scope of resourceSpans.scopeSpans) {
          for (const span of scope.spans) received.push({ service, span })
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.listen(port, "127.0.0.1", () => resume(Effect.void))
    }),
    () =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )
  return { url: `http://127.0.0.1:${port}`, received, paths } as const
})

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((candidate) => candidate.key === key)?.value
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : String(value.intValue))
}

const TestDatabase = Credentials.Default.pipe(Layer.provideMerge(DatabaseLive), Layer.provideMerge(TestConfig()))

layer(TestDatabase, { excludeTestServices: true, timeout: "60 seconds" })("traces (D18)", (it) => {
  it.scoped("one request's trace: the server span with route and status, its SQL statements as children", () =>
    Effect.gen(function*() {
      const config = yield* AppConfig
      const otlp = yield* collector
      const port = yield* freePort
      const api = yield* startService("api", {
        ...serviceEnvironment(config, `${config.redisPrefix}:traces`, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url }),
        PORT: String(port)
      })
      yield* readyzAnswers(port, api)
      const user = yield* createUser()
      const login = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/auth/login`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: user.email, password: PASSWORD })
        }).then((response) => response.json() as Promise<{ access_token: string }>)
      )
      // The caller's trace: the API's spans join it.
      const traceId = randomBytes(16).toString("hex")
      const callerSpan = randomBytes(8).toString("hex")
      const wallet = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/developer/account/wallet`, {
          headers: { authorization: `Bearer ${login.access_token}`, traceparent: `00-${traceId}-${callerSpan}-01` }
        })
      )
      expect(wallet.status).toBe(200)

      const server = yield* waitFor(
        "the wallet read's server span has arrived",
        Effect.sync(() =>
          Option.fromNullable(otlp.received.find(({ span }) => span.name === "GET /developer/account/wallet"))
        ),
        { limit: "20 seconds", alive: [api] }
      )
      expect(server.service).toBe("account-api")
      expect(server.span.traceId).toBe(traceId)
      expect(server.span.parentSpanId).toBe(callerSpan)
      expect(server.span.kind).toBe(2) // SERVER
      expect(attribute(server.span, "http.route")).toBe("/developer/account/wallet")
      expect(attribute(server.span, "http.response.status_code")).toBe("200")
      expect(attribute(server.span, "http.request.method")).toBe("GET")
      // Credentials never leave in a span.
      expect(JSON.stringify(otlp.received)).not.toContain(login.access_token)
      expect(JSON.stringify(otlp.received)).not.toContain(PASSWORD)

      // Its SQL statements, children (at any depth) of the server span, in the same trace.
      const statements = yield* waitFor(
        "the request's SQL spans have arrived",
        Effect.sync(() => {
          const inTrace = otlp.received.map(({ span }) => span).filter((span) => span.traceId === traceId)
          const sql = inTrace.filter((span) => span.name === "sql.execute")
          return sql.length > 0 ? Option.some({ inTrace, sql }) : Option.none()
        }),
        { limit: "20 seconds", alive: [api] }
      )
      const parents = new Map(statements.inTrace.map((span) => [span.spanId, span.parentSpanId]))
      const descendsFromServer = (span: OtlpSpan) => {
        let parent = span.parentSpanId
        for (let depth = 0; parent !== undefined && depth < 50; depth++) {
          if (parent === server.span.spanId) return true
          parent = parents.get(parent)
        }
        return false
      }
      for (const statement of statements.sql) {
        expect(descendsFromServer(statement)).toBe(true)
        expect(attribute(statement, "db.query.text") ?? attribute(statement, "db.statement")).toMatch(/SELECT|INSERT/i)
      }
      // Each request is a trace of its own: the sign-in's spans are elsewhere.
      const signInSpan = otlp.received.find(({ span }) => span.name === "POST /auth/login")
      expect(signInSpan?.span.traceId).not.toBe(traceId)
      expect(otlp.paths.every((path) => path.startsWith("POST /v1/traces application/json"))).toBe(true)
    }))
})

/** The typed producer in this process, the worker a real process exporting its traces. */
const TestProducer = Layer.mergeAll(SettlementProducer.Default, Wallets.Default, Credentials.Default).pipe(
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TestConfig())
)

layer(TestProducer, { excludeTestServices: true, timeout: "60 seconds" })("settlement traces (D18)", (it) => {
  it.scoped("a settlement batch is a span with its SQL, linked to the trace of the producer that passed its context", () =>
    Effect.gen(function*() {
      const config = yield* AppConfig
      const otlp = yield* collector
      const worker = yield* startService("worker", {
        ...serviceEnvironment(config, config.redisPrefix, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url })
      })
      const producer = yield* SettlementProducer
      const account = yield* newAccount("10")
      // The runner's own span: the typed producer passes it in the job as `traceparent`.
      const { result, span } = yield* Effect.gen(function*() {
        const span = yield* Effect.currentSpan
        const job = yield* producer.enqueueReserve({
          account_id: account.id,
          session_id: "traced",
          amount_usd: "1",
          idempotency_key: randomUUID()
        })
        expect(job.job.data.traceparent).toBe(`00-${span.traceId}-${span.spanId}-01`)
        return { result: yield* job.result(), span }
      }).pipe(Effect.withSpan("runner.session"))
      expect(result.status).toBe("applied")

      const batch = yield* waitFor(
        "the worker's batch span linked to the runner's span has arrived",
        Effect.sync(() =>
          Option.fromNullable(
            otlp.received.find(({ span: received }) =>
              received.name === "settlement.batch" &&
              (received.links ?? []).some((link) => link.traceId === span.traceId && link.spanId === span.spanId)
            )
          )
        ),
        { limit: "20 seconds", alive: [worker] }
      )
      expect(batch.service).toBe("account-api-worker")
      expect(attribute(batch.span, "settlement.batch.size")).toBe("1")
      const statements = yield* waitFor(
        "the batch's SQL spans have arrived",
        Effect.sync(() => {
          const children = otlp.received.filter(({ span: received }) =>
            received.traceId === batch.span.traceId && received.name === "sql.execute"
          )
          return children.length > 0 ? Option.some(children) : Option.none()
        }),
        { limit: "20 seconds", alive: [worker] }
      )
      expect(statements.every(({ span: statement }) => statement.traceId === batch.span.traceId)).toBe(true)
    }))
})
