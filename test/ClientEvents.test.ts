import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Scope } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { createServer, request } from "node:http"
import { Webhook } from "standardwebhooks"
import {
  AccountApiClient,
  AccountApiError,
  type AccountEvent,
  type AccountEventOf,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationFailed
} from "../packages/client/src/index.js"
import { sseParser } from "../packages/client/src/Sse.js"
import { AppConfig } from "../src/Config.js"
import { type Child, freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"

/**
 * D17 in the client package, against real API processes: the pull page by page and as a poller,
 * the alerts, the live stream as an async iterator that survives its API process being killed
 * and restarted while events are written (every event once, in the log's order), and the
 * webhook verifier on deliveries signed as D17 says with `standardwebhooks`.
 */

interface Api {
  readonly port: number
  readonly url: string
  process: Child
}

class Apis extends Context.Tag("test/ClientEvents/Apis")<Apis, {
  readonly writer: Api
  readonly reader: Api
  /** Starts the reader's process again on its port. */
  readonly restartReader: Effect.Effect<void>
}>() {}

const startApi = (environment: Record<string, string>, port: number) =>
  Effect.gen(function*() {
    const process = yield* startService("api", { ...environment, PORT: String(port) })
    yield* readyzAnswers(port, process)
    return process
  })

const ApisLive = Layer.scoped(
  Apis,
  Effect.gen(function*() {
    const config = yield* AppConfig
    // A short heartbeat: a quiet stream's comment lines keep the client's idle timeouts from firing.
    const environment = serviceEnvironment(config, `${config.redisPrefix}:client-events`, {
      EVENTS_HEARTBEAT_MS: "1000"
    })
    const [writerPort, readerPort] = yield* Effect.all([freePort, freePort])
    const writer: Api = {
      port: writerPort,
      url: `http://127.0.0.1:${writerPort}`,
      process: yield* startApi(environment, writerPort)
    }
    const reader: Api = {
      port: readerPort,
      url: `http://127.0.0.1:${readerPort}`,
      process: yield* startApi(environment, readerPort)
    }
    const scope = yield* Effect.scope
    return {
      writer,
      reader,
      // In the file's scope: each process started is killed when the file ends, if it still runs.
      restartReader: Effect.gen(function*() {
        reader.process = yield* Scope.extend(startApi(environment, readerPort), scope)
      })
    }
  })
)

const TestLayer = ApisLive.pipe(Layer.provideMerge(ProcessTestDatabase()))

/** A client signed in on `api` as a fresh administrator of their own account. */
const adminOn = (api: Api) =>
  Effect.gen(function*() {
    const user = yield* createUser({ admin: true })
    const client = new AccountApiClient({ baseUrl: api.url, retry: { baseDelayMs: 50, maxDelayMs: 1000 } })
    yield* Effect.promise(() => client.login(user.email, PASSWORD))
    return client
  })

/** The same account's client, on another process. */
const sameAccountOn = (api: Api, client: AccountApiClient) =>
  new AccountApiClient({
    baseUrl: api.url,
    retry: { baseDelayMs: 50, maxDelayMs: 1000 },
    ...(client.token === undefined ? {} : { token: client.token })
  })

const credits = (client: AccountApiClient, n: number) =>
  Effect.forEach(
    Array.from({ length: n }, () => "1"),
    (amount_usd) => Effect.promise(() => client.addCredit({ amount_usd })),
    { concurrency: 3, discard: true }
  )

/** Sets each budget in turn, each decided on the version the previous one answered. */
const budgets = (client: AccountApiClient, amounts: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    let expected_version = (await client.getWallet()).version
    for (const budget_usd of amounts) {
      expected_version = (await client.setBudget({ budget_usd, expected_version })).version
    }
  })

/** Every event of the account, oldest first, through the pull. */
const everyEvent = (client: AccountApiClient) =>
  Effect.promise(async () => {
    const events: Array<AccountEvent> = []
    for await (const page of client.eventPages({ limit: 500 })) events.push(...page.events)
    return events
  })

const rejectionOf = (promise: () => Promise<unknown>) =>
  Effect.promise(() => promise().then(() => undefined, (error: unknown) => error))

/**
 * A proxy to the stream that breaks its first connections once they have passed `after` events:
 * `cut` sends half of the next chunk (a frame cut in the middle) and hangs up; `stall` sends
 * nothing more and keeps the connection open, as a dead peer behind a NAT does. Later
 * connections pass. It records each connection's Last-Event-ID.
 */
const streamProxy = (target: string, policies: ReadonlyArray<"cut" | "stall">, after: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly resumedFrom: Array<string | undefined>; close: () => void }>(
      (resume) => {
        const upstream = new URL(target)
        const resumedFrom: Array<string | undefined> = []
        const server = createServer((incoming, outgoing) => {
          const policy = policies[resumedFrom.length]
          const header = incoming.headers["last-event-id"]
          resumedFrom.push(typeof header === "string" ? header : undefined)
          let passed = 0
          let tripped = false
          const forwarded = request({
            host: upstream.hostname,
            port: upstream.port,
            method: incoming.method,
            path: incoming.url,
            headers: { ...incoming.headers, host: upstream.host }
          }, (answer) => {
            outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.on("data", (chunk: Buffer) => {
              if (tripped) return
              if (policy !== undefined && passed >= after) {
                tripped = true
                if (policy === "cut") {
                  outgoing.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))))
                  outgoing.socket?.destroy()
                  forwarded.destroy()
                }
                return
              }
              passed += chunk.toString("utf8").split("\nid: ").length - 1 +
                (chunk.toString("utf8").startsWith("id: ") ? 1 : 0)
              outgoing.write(chunk)
            })
            answer.on("end", () => outgoing.end())
          })
          forwarded.on("error", () => outgoing.socket?.destroy())
          incoming.on("close", () => forwarded.destroy())
          forwarded.end()
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(Effect.succeed({
            url: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`,
            resumedFrom,
            close: () => {
              server.closeAllConnections()
              server.close()
            }
          }))
        })
      }
    ),
    (proxy) => Effect.sync(() => proxy.close())
  )

const until = (what: string, check: () => boolean, alive: ReadonlyArray<Child> = []) =>
  waitFor(what, Effect.sync(() => check() ? Option.some(true) : Option.none()), {
    limit: "30 seconds",
    every: "10 millis",
    alive
  })

describe("the client's server-sent events parser", () => {
  // Line ends of all three kinds, comments, a field without a colon, data on several lines, an id
  // with no data (it still sets the last id), an unknown field, retry.
  const text = ": connected\r\n\r\nid: 1\nevent: wallet.credit_added\ndata: {\"a\":1}\n\n" +
    "id: 2\r\nevent:wallet.depleted\r\ndata: line one\r\ndata:line two\r\nignored: x\r\n\r\n" +
    ": keep-alive\r\rid: 3\r\r" +
    "data\rretry: 2500\r\n\n"
  const expected = [
    { event: "wallet.credit_added", data: "{\"a\":1}", lastEventId: "1" },
    { event: "wallet.depleted", data: "line one\nline two", lastEventId: "2" },
    { event: "message", data: "", lastEventId: "3" }
  ]

  it("reads a stream the same however its chunks fall", () => {
    const whole = sseParser()
    expect(whole.push(text)).toEqual(expected)
    expect(whole.retryMs()).toBe(2500)
    for (let cut = 0; cut <= text.length; cut++) {
      const split = sseParser()
      expect([...split.push(text.slice(0, cut)), ...split.push(text.slice(cut))]).toEqual(expected)
    }
    const single = sseParser()
    expect([...text].flatMap((char) => single.push(char))).toEqual(expected)
  })
})

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("events in the client package (D17)", (it) => {
  describe("the pull and the alerts", () => {
    it.effect("reads and replaces the alerts, pages the log by next_after, filters by type, and polls", () =>
      Effect.gen(function*() {
        const { writer } = yield* Apis
        const client = yield* adminOn(writer)
        const unsaved = yield* Effect.promise(() => client.getAlerts())
        expect(unsaved).toEqual({ version: 0, thresholds: [], updated_at: null })
        const saved = yield* Effect.promise(() =>
          client.replaceAlerts({ thresholds: [{ amount_usd: "5" }], expected_version: 0 })
        )
        expect(saved).toMatchObject({ version: 1, thresholds: [{ amount_usd: "5.000000" }] })
        const stale = yield* rejectionOf(() => client.replaceAlerts({ thresholds: [], expected_version: 0 }))
        expect(stale).toBeInstanceOf(AccountApiError)
        expect(stale).toMatchObject({ status: 409, code: "version_conflict", current_version: 1 })

        // Below the threshold and back: a budget of 10, then 3 (balance_low), then 10 (balance_recovered).
        yield* budgets(client, ["10", "3", "10"])
        yield* credits(client, 17)
        const log = yield* Effect.promise(() => client.listEvents({ limit: 500 }))
        expect(log.next_after).toBeNull()
        expect(log.events.map((event) => event.type)).toEqual([
          "wallet.budget_set",
          "wallet.budget_set",
          "wallet.balance_low",
          "wallet.budget_set",
          "wallet.balance_recovered",
          ...Array.from({ length: 17 }, () => "wallet.credit_added")
        ])

        // The newest in one request, newest first, as an overview shows them.
        const newest = yield* Effect.promise(() => client.listEvents({ order: "newest", limit: 3 }))
        expect(newest).toEqual({ events: log.events.slice(-3).reverse(), next_after: null })
        const lastBudget = yield* Effect.promise(() =>
          client.listEvents({ order: "newest", type: "wallet.budget_set" })
        )
        expect(lastBudget.events.map((event) => event.id)).toEqual([
          log.events[3]?.id,
          log.events[1]?.id,
          log.events[0]?.id
        ])

        const pages = yield* Effect.promise(async () => {
          const pages = []
          for await (const page of client.eventPages({ limit: 5 })) pages.push(page)
          return pages
        })
        expect(pages.map((page) => page.events.length)).toEqual([5, 5, 5, 5, 2])
        expect(pages.flatMap((page) => page.events)).toEqual(log.events)
        for (const page of pages.slice(0, -1)) expect(page.next_after).toBe(page.events[4]?.id)

        const lows = yield* Effect.promise(async () => {
          const lows: Array<AccountEventOf<"wallet.balance_low">> = []
          for await (const page of client.eventPages({ type: "wallet.balance_low" })) {
            for (const event of page.events) if (event.type === "wallet.balance_low") lows.push(event)
          }
          return lows
        })
        expect(lows.map((event) => event.id)).toEqual([log.events[2]?.id])
        expect(lows[0]?.data.threshold_usd).toBe("5.000000")
        expect(lows[0]?.data.wallet.available_usd).toBe("3.000000")

        const unknown = yield* rejectionOf(() => client.listEvents({ after: randomUUID() }))
        expect(unknown).toMatchObject({ status: 404, code: "event_not_found" })

        // A poller from the tenth event: what follows it, then the events written while it polls.
        const abort = new AbortController()
        const polled: Array<AccountEvent> = []
        const polling = (async () => {
          for await (
            const event of client.pollEvents({
              after: log.events[9]?.id ?? "",
              limit: 4,
              intervalMs: 50,
              signal: abort.signal
            })
          ) polled.push(event)
        })()
        yield* until("the poller caught up", () => polled.length === 12)
        yield* credits(client, 3)
        yield* until("the poller found the new events", () => polled.length === 15)
        abort.abort()
        yield* Effect.promise(() => polling)
        const after = yield* everyEvent(client)
        expect(polled).toEqual(after.slice(10))
      }))
  })

  /** What a test that starts its reader's API process again twice may take. */
  const RESTARTS_BOUND_MS = 120_000

  describe("the live stream", () => {
    it.effect(
      "yields every event once, in the log's order, while its API process is killed, stopped and started again",
      () =>
        Effect.gen(function*() {
          const { reader, restartReader, writer } = yield* Apis
          const writing = yield* adminOn(writer)
          const reading = sameAccountOn(reader, writing)
          // The stream resumes after this event: what follows it comes whenever the stream connects.
          yield* credits(writing, 1)
          const [seed] = yield* everyEvent(writing)
          const abort = new AbortController()
          const received: Array<AccountEvent> = []
          const TOTAL = 50
          const consuming = (async () => {
            for await (
              const event of reading.streamEvents({
                lastEventId: seed?.id ?? "",
                signal: abort.signal,
                idleTimeoutMs: 5000
              })
            ) {
              received.push(event)
              if (received.length === TOTAL) break
            }
          })()

          yield* credits(writing, 10)
          yield* until("the live events", () => received.length === 10, [writer.process])
          // SIGKILL: the connection breaks mid-stream; events are written while the process is down and starting.
          reader.process.kill()
          yield* reader.process.exited
          yield* Effect.all([credits(writing, 10), restartReader], { concurrency: 2 })
          yield* credits(writing, 10)
          yield* until("the events after the kill", () => received.length === 30, [writer.process, reader.process])
          // SIGTERM: the service ends its streams cleanly; the client reconnects, here to the process started again.
          reader.process.signal("SIGTERM")
          yield* reader.process.exited
          yield* credits(writing, 10)
          yield* restartReader
          yield* credits(writing, 10)
          yield* Effect.promise(() => consuming)

          const log = yield* everyEvent(writing)
          expect(log).toHaveLength(TOTAL + 1)
          expect(received.map((event) => event.id)).toEqual(log.slice(1).map((event) => event.id))
          expect(received).toEqual(log.slice(1))
          abort.abort()
        }),
      // Two starts of an API process (seconds each on a loaded machine) and 51 credits: past the
      // default bound, the reader would be left down for the tests after this one.
      RESTARTS_BOUND_MS
    )

    it.scoped("a connection cut in the middle of a frame, or gone silent, is opened again: every event once, in order", () =>
      Effect.gen(function*() {
        const { reader, writer } = yield* Apis
        const writing = yield* adminOn(writer)
        yield* credits(writing, 1)
        const [seed] = yield* everyEvent(writing)
        const proxy = yield* streamProxy(reader.url, ["cut", "stall", "cut"], 3)
        const reading = new AccountApiClient({
          baseUrl: proxy.url,
          retry: { baseDelayMs: 50, maxDelayMs: 500 },
          ...(writing.token === undefined ? {} : { token: writing.token })
        })
        const abort = new AbortController()
        const received: Array<AccountEvent> = []
        const TOTAL = 30
        const consuming = (async () => {
          // Shorter than the default, so the stalled connection is given up within the test.
          for await (
            const event of reading.streamEvents({
              lastEventId: seed?.id ?? "",
              signal: abort.signal,
              idleTimeoutMs: 1500
            })
          ) {
            received.push(event)
            if (received.length === TOTAL) break
          }
        })()
        // One at a time, each once the previous one arrived: each reaches the stream live, in a chunk of its own.
        for (let i = 0; i < TOTAL; i++) {
          yield* Effect.promise(() => writing.addCredit({ amount_usd: "1" }))
          yield* until(`event ${i + 1}`, () => received.length > i, [reader.process])
        }
        yield* Effect.promise(() => consuming)
        const log = yield* everyEvent(writing)
        expect(received).toEqual(log.slice(1))
        // Three broken connections, each resumed after the last whole event the client had.
        expect(proxy.resumedFrom.length).toBeGreaterThanOrEqual(4)
        expect(proxy.resumedFrom[0]).toBe(seed?.id)
        const ids = log.map((event) => event.id)
        for (const [i, id] of proxy.resumedFrom.slice(1, 4).entries()) {
          expect(ids.indexOf(id ?? "")).toBeGreaterThan(ids.indexOf(proxy.resumedFrom[i] ?? ""))
        }
      }))

    it.effect("aborting its signal ends the iteration; a refusal that asking again will not change is thrown", () =>
      Effect.gen(function*() {
        const { reader, writer } = yield* Apis
        const writing = yield* adminOn(writer)
        const reading = sameAccountOn(reader, writing)
        const abort = new AbortController()
        const received: Array<AccountEvent> = []
        const consuming = (async () => {
          for await (const event of reading.streamEvents({ signal: abort.signal })) received.push(event)
          return "ended"
        })()
        // Without Last-Event-ID the stream starts at the next commit: write until one arrives.
        yield* waitFor(
          "an event on the stream",
          Effect.zipRight(
            credits(writing, 1),
            Effect.sync(() => received.length > 0 ? Option.some(true) : Option.none())
          ),
          { limit: "30 seconds", every: "200 millis", alive: [reader.process] }
        )
        abort.abort()
        expect(yield* Effect.promise(() => consuming)).toBe("ended")
        expect(received[0]?.type).toBe("wallet.credit_added")

        const pruned = yield* rejectionOf(async () => {
          for await (const _ of reading.streamEvents({ lastEventId: randomUUID() })) return
        })
        expect(pruned).toBeInstanceOf(AccountApiError)
        expect(pruned).toMatchObject({ status: 404, code: "event_not_found" })
        const anonymous = new AccountApiClient({ baseUrl: reader.url })
        const unauthenticated = yield* rejectionOf(async () => {
          for await (const _ of anonymous.streamEvents()) return
        })
        expect(unauthenticated).toMatchObject({ status: 401, code: "unauthenticated" })
      }))
  })

  describe("the webhook verifier", () => {
    const secret = () => `whsec_${randomBytes(32).toString("base64")}`

    /** A delivery as D17 sends it: the Standard Webhooks headers and `{ type, timestamp, data }`, signed with each secret. */
    const deliver = (event: AccountEvent, secrets: ReadonlyArray<string>, at = new Date()) => {
      const body = JSON.stringify({ type: event.type, timestamp: event.created_at, data: event.data })
      return {
        body,
        headers: {
          "webhook-id": event.id,
          "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
          "webhook-signature": secrets.map((key) => new Webhook(key).sign(event.id, at, body)).join(" ")
        }
      }
    }

    const failureOf = (verify: () => unknown) => {
      try {
        verify()
      } catch (error) {
        return error instanceof WebhookVerificationFailed ? error.reason : error
      }
      return "verified"
    }

    it.effect("answers the typed event of a signed delivery, with either secret of a rotation, and refuses the rest", () =>
      Effect.gen(function*() {
        const { writer } = yield* Apis
        const client = yield* adminOn(writer)
        yield* Effect.promise(() => client.replaceAlerts({ thresholds: [{ amount_usd: "5" }] }))
        yield* budgets(client, ["10", "4"])
        yield* credits(client, 1)
        const events = yield* everyEvent(client)
        expect(events.map((event) => event.type)).toEqual([
          "wallet.budget_set",
          "wallet.budget_set",
          "wallet.balance_low",
          "wallet.credit_added",
          "wallet.balance_recovered"
        ])
        const [old, current] = [secret(), secret()]
        for (const event of events) {
          const expected: WebhookEvent = (({ created_at, ...rest }) => ({ ...rest, timestamp: created_at }))(event)
          // Signed with one secret; during a rotation with both, space-separated.
          const single = deliver(event, [current])
          expect(verifyWebhook(current, single.body, single.headers)).toEqual(expected)
          const rotating = deliver(event, [old, current])
          expect(verifyWebhook(old, rotating.body, rotating.headers)).toEqual(expected)
          expect(verifyWebhook(current, Buffer.from(rotating.body), new Headers(rotating.headers))).toEqual(expected)
          // A receiver that holds both secrets takes a delivery signed by either.
          const byOld = deliver(event, [old])
          expect(verifyWebhook([current, old], byOld.body, byOld.headers)).toEqual(expected)
        }
        const [, , crossing, event] = events
        if (crossing === undefined || event === undefined) return yield* Effect.dieMessage("missing events")
        const delivered = deliver(crossing, [current])
        const low = verifyWebhook(current, delivered.body, delivered.headers)
        // Narrowed by its type, as a receiver's switch would.
        expect(low.type === "wallet.balance_low" ? low.data.threshold_usd : undefined).toBe("5.000000")

        const signed = deliver(event, [current])
        expect(failureOf(() => verifyWebhook(secret(), signed.body, signed.headers))).toBe("invalid_signature")
        expect(
          failureOf(() => verifyWebhook(current, signed.body.replace(/"1\.000000"/, "\"9.000000\""), signed.headers))
        )
          .toBe("invalid_signature")
        expect(failureOf(() => verifyWebhook(current, signed.body, { ...signed.headers, "webhook-id": randomUUID() })))
          .toBe("invalid_signature")
        const { "webhook-signature": _, ...unsigned } = signed.headers
        expect(failureOf(() => verifyWebhook(current, signed.body, unsigned))).toBe("missing_headers")
        const stale = deliver(event, [current], new Date(Date.now() - 10 * 60_000))
        expect(failureOf(() => verifyWebhook(current, stale.body, stale.headers))).toBe("invalid_timestamp")
        // Signed, but not an event of the catalog.
        const body = JSON.stringify({ type: "invoice.paid", timestamp: event.created_at, data: event.data })
        const at = new Date()
        const unknownType = {
          body,
          headers: {
            "webhook-id": event.id,
            "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
            "webhook-signature": new Webhook(current).sign(event.id, at, body)
          }
        }
        expect(failureOf(() => verifyWebhook(current, unknownType.body, unknownType.headers))).toBe("invalid_payload")
      }))
  })
})
