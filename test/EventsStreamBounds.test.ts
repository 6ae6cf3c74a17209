import * as HttpServer from "@effect/platform/HttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { createOrganisation } from "./support/policies.js"
import { waitFor } from "./support/processes.js"
import { slowGet } from "./support/rawHttp.js"
import { eventsOf, openStream, type Reader } from "./support/sse.js"
import { signedInUser, TestApp } from "./support/TestApp.js"

/**
 * The live stream's bounds (D17): a process holds at most so many streams per user and per
 * account, refuses more with 429 rate_limited naming the bound, and frees a place the moment a
 * stream ends: the client hanging up, or a reader that stopped reading cut off after two heartbeats.
 */

const PER_USER = 2
const PER_ACCOUNT = 3
const HEARTBEAT_MS = 400
const STREAM = "/developer/account/events/stream"

const serverPort = Effect.map(
  HttpServer.HttpServer,
  (server) => server.address._tag === "TcpAddress" ? server.address.port : 0
)

const openStreams = Effect.flatMap(serverPort, (port) =>
  Effect.promise(async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    return Number(text.match(/^account_api_event_streams (\d+)$/m)?.[1] ?? "NaN")
  }))

/** Waits until the process holds `count` streams. */
const streamsOpen = (count: number) =>
  waitFor(`${count} streams open`, Effect.map(openStreams, (n) => n === count ? Option.some(n) : Option.none()), {
    limit: "10 seconds",
    every: "20 millis"
  })

const connected = (reader: Reader) =>
  waitFor(
    "the stream is open",
    Effect.sync(() => reader.frames.some((frame) => frame.comment === "connected") ? Option.some(true) : Option.none()),
    { limit: "10 seconds", every: "10 millis" }
  )

/** Events for the user's own account, some 2 KB each, written straight into the log (as a busy month would have). */
const manyEvents = (accountId: string, count: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.gen(function*() {
      yield* sql`INSERT INTO account_event_heads (account_kind, account_id, last_position)
                 VALUES ('user', ${accountId}, ${count})`
      yield* sql`INSERT INTO account_events (account_kind, account_id, position, type, data)
                 SELECT 'user', ${accountId}, n, 'wallet.depleted',
                   json_build_object('padding', repeat('x', 2000))
                 FROM generate_series(1, ${count}) AS n`
    })).pipe(Effect.orDie)

const refusedBy = (reader: Reader, name: string, limit: number) => {
  expect(reader.status).toBe(429)
  expect(reader.retryAfter).toMatch(/^[1-9]\d*$/)
  expect(reader.problem).toMatchObject({
    type: "about:blank",
    title: "Too Many Requests",
    status: 429,
    code: "rate_limited",
    limit_name: name,
    limit
  })
  expect(String(reader.problem?.detail)).toContain(`At most ${limit} live event streams`)
  expect(String(reader.problem?.detail)).toContain(name)
}

layer(
  TestApp({
    EVENTS_HEARTBEAT_MS: String(HEARTBEAT_MS),
    EVENT_STREAMS_PER_USER: String(PER_USER),
    EVENT_STREAMS_PER_ACCOUNT: String(PER_ACCOUNT)
  }),
  { excludeTestServices: true, timeout: "60 seconds" }
)("the live stream's bounds (D17)", (it) => {
  describe("streams open at once", () => {
    it.scoped("past the bound per user and then per account: 429 naming it; a client that hangs up frees its place", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const organisationId = yield* createOrganisation()
        const ada = yield* signedInUser({ organisationId })
        const bob = yield* signedInUser({ organisationId })
        yield* streamsOpen(0)

        const adas = yield* Effect.all(Array.from({ length: PER_USER }, () => openStream(port, ada.token)))
        for (const reader of adas) expect(reader.status).toBe(200)
        refusedBy(yield* openStream(port, ada.token), "event_streams_per_user", PER_USER)

        // Another member of the same account: within their own bound, but the account's is reached.
        const bobs = yield* openStream(port, bob.token)
        expect(bobs.status).toBe(200)
        refusedBy(yield* openStream(port, bob.token), "event_streams_per_account", PER_ACCOUNT)
        yield* streamsOpen(PER_ACCOUNT)

        // Ada hangs up one of hers: the place is free again, for any member.
        adas[0]?.close()
        yield* streamsOpen(PER_ACCOUNT - 1)
        const again = yield* openStream(port, bob.token)
        expect(again.status).toBe(200)
        yield* connected(again)

        // Another account is not held back by this one's bound.
        const other = yield* signedInUser()
        expect((yield* openStream(port, other.token)).status).toBe(200)
      }))

    it.scoped("a reader that stops reading is let go within two heartbeats of its socket filling: its place is freed", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const user = yield* signedInUser()
        yield* streamsOpen(0)
        const stalled = slowGet(port, STREAM, { token: user.token, bytesPerSecond: 0 })
        yield* Effect.addFinalizer(() => Effect.sync(stalled.destroy))
        expect(yield* Effect.promise(() => stalled.status)).toBe(200)
        const live = yield* openStream(port, user.token)
        yield* connected(live)
        refusedBy(yield* openStream(port, user.token), "event_streams_per_user", PER_USER)

        // Some 10 MB: more than the kernel's buffers take, so the stalled reader's socket fills.
        const count = 5000
        yield* manyEvents(user.id, count)
        const written = performance.now()
        // The server lets go of it: its place is freed while the live reader keeps its own.
        yield* streamsOpen(1)
        const freedAfterMs = performance.now() - written
        console.log(JSON.stringify({ stalled_reader_freed_after_ms: Math.round(freedAfterMs) }))
        // Two heartbeats of stall once the buffers are full, with headroom for a loaded machine.
        expect(freedAfterMs).toBeLessThan(2 * HEARTBEAT_MS + 8000)
        // Read on, the stalled reader finds its answer cut short, far from the whole log.
        stalled.resume()
        const closed = yield* Effect.promise(() => stalled.closed).pipe(Effect.timeout("20 seconds"))
        expect(closed.aborted).toBe(true)
        expect(stalled.received().split("\nevent: ").length - 1).toBeLessThan(count)

        // The reader that reads got everything, unharmed by its account's stalled stream.
        yield* waitFor(
          "every event on the live stream",
          Effect.sync(() => eventsOf(live).length >= count ? Option.some(true) : Option.none()),
          { limit: "30 seconds", every: "50 millis" }
        )
        expect(eventsOf(live).length).toBe(count)
        // The stalled stream's place is free.
        const next = yield* openStream(port, user.token)
        expect(next.status).toBe(200)
      }))
  })
})
