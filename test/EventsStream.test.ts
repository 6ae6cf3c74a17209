import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, type Duration, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import {
  type Child,
  exitWithin,
  freePort,
  readyzAnswers,
  serviceEnvironment,
  startService,
  waitFor
} from "./support/processes.js"
import { eventsOf, openStream } from "./support/sse.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"

/**
 * D17's live stream across processes: an event committed through one API process reaches a
 * stream held on another (LISTEN/NOTIFY, one listening connection per process), a stream
 * resumed with Last-Event-ID gets exactly what it missed, and SIGTERM ends open streams.
 * Read with `fetch`, as a browser-side or Node client would.
 */

interface Api {
  readonly port: number
  readonly process: Child
}

class Apis extends Context.Tag("test/EventsStream/Apis")<Apis, { readonly a: Api; readonly b: Api }>() {}

const until = (what: string, check: () => boolean, api: Api, limit: Duration.DurationInput = "10 seconds") =>
  waitFor(what, Effect.sync(() => check() ? Option.some(true) : Option.none()), {
    limit,
    every: "5 millis",
    alive: [api.process]
  })

const json = (port: number, method: string, path: string, token: string | undefined, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: response.status, body: await response.json() as Record<string, unknown> }
  })

/** An administrator of their own account, signed in on `api`. */
const admin = (api: Api) =>
  Effect.gen(function*() {
    const user = yield* createUser({ admin: true })
    const login = yield* json(api.port, "POST", "/auth/login", undefined, { email: user.email, password: PASSWORD })
    return String(login.body.access_token)
  })

const credit = (api: Api, token: string) =>
  Effect.flatMap(
    json(api.port, "POST", "/developer/account/wallet/credits", token, {
      amount_usd: "1",
      idempotency_key: randomUUID()
    }),
    (reply) => reply.status === 200 ? Effect.void : Effect.dieMessage(`credit: ${reply.status}`)
  )

const pulled = (api: Api, token: string) =>
  Effect.map(
    json(api.port, "GET", "/developer/account/events?limit=500", token),
    (reply) => reply.body.events as ReadonlyArray<{ id: string; type: string }>
  )

const startApi = (environment: Record<string, string>) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const process = yield* startService("api", { ...environment, PORT: String(port) })
    yield* readyzAnswers(port, process)
    return { port, process } satisfies Api
  })

const ApisLive = Layer.scoped(
  Apis,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const environment = serviceEnvironment(config, `${config.redisPrefix}:events`)
    // A's heartbeat is short, so a quiet stream's comment line is seen within the test. B's is long,
    // so on B nothing but a notification (or the listener's return) sends a stream anything.
    const [a, b] = yield* Effect.all([
      startApi({ ...environment, EVENTS_HEARTBEAT_MS: "300" }),
      startApi({ ...environment, EVENTS_HEARTBEAT_MS: "60000" })
    ], { concurrency: 2 })
    return { a, b }
  })
)

const TestLayer = ApisLive.pipe(Layer.provideMerge(ProcessTestDatabase()))

layer(TestLayer, { excludeTestServices: true, timeout: "90 seconds" })("the live event stream (D17)", (it) => {
  describe("across two API processes", () => {
    it.scoped("an event committed through A reaches a stream held on B; a quiet stream sends comment lines", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const token = yield* admin(a)
        const stream = yield* openStream(b.port, token)
        expect(stream.status).toBe(200)
        expect(stream.contentType).toMatch(/^text\/event-stream/)
        yield* until("the stream is open", () => stream.frames.some((frame) => frame.comment === "connected"), b)
        const latencies: Array<number> = []
        for (let i = 0; i < 10; i++) {
          const before = eventsOf(stream).length
          const sent = performance.now()
          yield* credit(a, token)
          yield* until(`event ${i + 1} reaches B`, () => eventsOf(stream).length > before, b)
          const frame = eventsOf(stream)[before]
          latencies.push((frame?.at ?? sent) - sent)
        }
        // The time from the request to A (commit inside it) to the event read from B: an upper bound of commit to stream.
        latencies.sort((x, y) => x - y)
        console.log(JSON.stringify({
          request_to_stream_ms: {
            median: latencies[5]?.toFixed(1),
            max: latencies[9]?.toFixed(1)
          }
        }))
        const log = yield* pulled(a, token)
        expect(eventsOf(stream).map((frame) => frame.id)).toEqual(log.map((event) => event.id))
        for (const frame of eventsOf(stream)) {
          expect(frame.event).toBe("wallet.credit_added")
          expect(JSON.parse(frame.data ?? "")).toMatchObject({ id: frame.id, type: "wallet.credit_added" })
        }
        const quiet = yield* openStream(a.port, token)
        yield* until("a comment line while nothing happens", () => {
          const last = quiet.frames[quiet.frames.length - 1]
          return last?.comment === "keep-alive"
        }, a)
      }))

    it.scoped("Last-Event-ID resumes from the log with exactly the events missed, then live, on either process", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const token = yield* admin(a)
        const first = yield* openStream(b.port, token)
        yield* until("the stream is open", () => first.frames.some((frame) => frame.comment === "connected"), b)
        yield* credit(a, token)
        yield* until("the first event", () => eventsOf(first).length === 1, b)
        const seen = eventsOf(first)[0]?.id ?? ""
        first.close()
        // Missed while no stream was open: three events, through both processes.
        yield* credit(a, token)
        yield* credit(b, token)
        yield* credit(a, token)
        const resumed = yield* openStream(b.port, token, seen)
        yield* until("the missed events", () => eventsOf(resumed).length === 3, b)
        yield* credit(a, token)
        yield* until("the next event, live", () => eventsOf(resumed).length === 4, b)
        const log = yield* pulled(a, token)
        expect(log).toHaveLength(5)
        expect(eventsOf(resumed).map((frame) => frame.id)).toEqual(log.slice(1).map((event) => event.id))
        // Resumed on A too, from the same place: the same events.
        const onA = yield* openStream(a.port, token, seen)
        yield* until("the events after the first, on A", () => eventsOf(onA).length === 4, a)
        expect(eventsOf(onA).map((frame) => frame.id)).toEqual(log.slice(1).map((event) => event.id))
        // An id this account never had: 404 before any stream.
        const unknown = yield* openStream(b.port, token, randomUUID())
        expect(unknown.status).toBe(404)
      }))

    it.scoped("concurrent writes through both processes: each stream gets every event once, in the log's order", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const token = yield* admin(a)
        const onB = yield* openStream(b.port, token)
        const onA = yield* openStream(a.port, token)
        yield* until(
          "both streams are open",
          () => [onA, onB].every((stream) => stream.frames.some((frame) => frame.comment === "connected")),
          b
        )
        // Credits race for the wallet's lock, so their events commit in an order no one chose.
        yield* Effect.all(Array.from({ length: 30 }, (_, i) => credit(i % 2 === 0 ? a : b, token)), {
          concurrency: 10
        })
        const log = yield* pulled(a, token)
        expect(log).toHaveLength(30)
        for (const [stream, api] of [[onB, b], [onA, a]] as const) {
          yield* until("every event", () => eventsOf(stream).length >= 30, api)
          expect(eventsOf(stream).map((frame) => frame.id)).toEqual(log.map((event) => event.id))
        }
      }))

    it.scoped("an event committed while a process's listening connection is down still reaches its streams", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const sql = yield* SqlClient.SqlClient
        const token = yield* admin(a)
        const stream = yield* openStream(b.port, token)
        yield* until("the stream is open", () => stream.frames.some((frame) => frame.comment === "connected"), b)
        // Every process's events listener goes; each reconnects a second later, deaf until then.
        const cut = yield* sql<{ readonly n: number }>`
          SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'account-api:account_events'`
        expect(cut[0]?.n).toBeGreaterThanOrEqual(2)
        yield* credit(a, token)
        // No notification reached B for this commit; its listener, back, has every stream read again.
        yield* until("the event reaches B", () => eventsOf(stream).length === 1, b)
        expect(eventsOf(stream)[0]?.event).toBe("wallet.credit_added")
      }))

    it.scoped("a stream whose client goes away is let go: the process's open-streams gauge falls back", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const token = yield* admin(a)
        const gauge = Effect.promise(async () => {
          const text = await (await fetch(`http://127.0.0.1:${b.port}/metrics`)).text()
          return Number(text.match(/^account_api_event_streams (\d+)$/m)?.[1] ?? "NaN")
        })
        const idle = yield* gauge
        const readers = yield* Effect.all([openStream(b.port, token), openStream(b.port, token)])
        yield* until(
          "both streams are open",
          () => readers.every((stream) => stream.frames.some((frame) => frame.comment === "connected")),
          b
        )
        expect(yield* gauge).toBe(idle + 2)
        for (const reader of readers) reader.close()
        yield* waitFor(
          "the streams are let go",
          Effect.map(gauge, (count) => count === idle ? Option.some(count) : Option.none()),
          {
            limit: "10 seconds",
            alive: [b.process]
          }
        )
      }))

    it.scoped("SIGTERM ends an open stream and the process exits within the drain limit", () =>
      Effect.gen(function*() {
        const { a, b } = yield* Apis
        const token = yield* admin(a)
        const stream = yield* openStream(b.port, token)
        yield* until("the stream is open", () => stream.frames.some((frame) => frame.comment === "connected"), b)
        const signalled = performance.now()
        b.process.signal("SIGTERM")
        const exited = yield* exitWithin(b.process, "10 seconds")
        console.log(
          JSON.stringify({ sigterm_to_exit_with_a_stream_open_ms: Math.round(performance.now() - signalled) })
        )
        expect(exited.code, b.process.output()).toBe(0)
        yield* until("the stream ended", stream.ended, a)
      }))
  })
})
