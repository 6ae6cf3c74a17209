import * as HttpServer from "@effect/platform/HttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { AppConfig } from "../src/Config.js"
import { exitWithin, freePort, readyzAnswers, serviceEnvironment, startService } from "./support/processes.js"
import { fullGet, type RawReader, slowGet } from "./support/rawHttp.js"
import { call, createUser, PASSWORD, signIn, TestApp } from "./support/TestApp.js"
import { getLedger, getWallet, newKey, putBudget } from "./support/Wallets.js"

/**
 * The export (D13) under attack and fault, as the trials made them: slow and stalled readers,
 * and a database connection that dies mid-stream.
 */

const CSV = "/developer/account/wallet/ledger.csv"
/** Entries per attacking account: some 8 MB of CSV, more than a paused socket's buffers hold. */
const ROWS = 20_000
const STALL_SECONDS = 3

const serverPort = Effect.map(
  HttpServer.HttpServer,
  (server) => server.address._tag === "TcpAddress" ? server.address.port : 0
)

/**
 * A signed-in member whose wallet holds `rows` credits with long notes, written straight into the
 * ledger (as years of use would have), the wallet row kept in step.
 */
const memberWithLedger = (rows: number) =>
  Effect.gen(function*() {
    const user = yield* createUser()
    const token = yield* signIn(user.email)
    expect((yield* putBudget(token, { budget_usd: "100", idempotency_key: newKey() })).status).toBe(200)
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
        spent_after_usd, available_after_usd, note)
      SELECT w.id, w.last_sequence + g, 'credit_added', 1, w.budget_usd + g, 0, 0, w.budget_usd + g,
        'credit ' || g || ' ' || repeat('n', 300)
      FROM wallets w, generate_series(1, ${rows}::int) g WHERE w.account_id = ${user.id}`
    yield* sql`UPDATE wallets SET last_sequence = last_sequence + ${rows}::int, budget_usd = budget_usd + ${rows}::int
      WHERE account_id = ${user.id}`
    return { ...user, token }
  }).pipe(Effect.orDie)

const releasing = (readers: ReadonlyArray<RawReader>) =>
  Effect.sync(() => {
    for (const reader of readers) reader.destroy()
  })

/** Ends every connection of the service to this test's database but the one asking: a failover, as PostgreSQL sees it. */
const terminateServiceBackends = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly n: string }>`
    SELECT count(pg_terminate_backend(pid))::text AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'account-api'`).pipe(
    Effect.orDie
  )

/**
 * An API process of its own with two exports whose readers take nothing, then SIGTERM (after
 * `beforeSignal`): it must exit 0 within 10 s (the drain limit is 8 s after the signal).
 */
const sigtermWithStalledExports = <E, R>(prefix: string, beforeSignal: Effect.Effect<unknown, E, R>) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const member = yield* memberWithLedger(ROWS)
    const port = yield* freePort
    const api = yield* startService(
      "api",
      serviceEnvironment(config, `${config.redisPrefix}:${prefix}`, { PORT: String(port) })
    )
    yield* readyzAnswers(port, api)
    const readers = [0, 1].map(() => slowGet(port, CSV, { token: member.token, bytesPerSecond: 0 }))
    yield* Effect.gen(function*() {
      expect(yield* Effect.promise(() => Promise.all(readers.map((reader) => reader.status)))).toEqual([200, 200])
      yield* beforeSignal
      api.signal("SIGTERM")
      const exited = yield* exitWithin(api, "10 seconds")
      expect(exited.code).toBe(0)
    }).pipe(Effect.ensuring(releasing(readers)))
  }).pipe(Effect.scoped)

layer(TestApp({ EXPORT_STALL_SECONDS: String(STALL_SECONDS) }), { excludeTestServices: true, timeout: "120 seconds" })(
  "the ledger export under attack (issue 22)",
  (it) => {
    describe("slow readers (22.1)", () => {
      it.effect(
        "32 exports read a few bytes a second: another account's reads and sign-in answer 200 and /readyz stays 200",
        () =>
          Effect.gen(function*() {
            const port = yield* serverPort
            const attackers = yield* Effect.forEach([1, 2, 3, 4], () => memberWithLedger(ROWS))
            const bystander = yield* createUser()
            const bystanderToken = yield* signIn(bystander.email)
            const readers = attackers.flatMap((attacker) =>
              Array.from({ length: 8 }, () => slowGet(port, CSV, { token: attacker.token, bytesPerSecond: 8 }))
            )
            yield* Effect.gen(function*() {
              const statuses = yield* Effect.promise(() => Promise.all(readers.map((reader) => reader.status)))
              // Long enough for every export to fill its socket's buffers and wait on the reader.
              yield* Effect.sleep("2 seconds")
              const [login, wallet, ledger, ready] = yield* Effect.all([
                call("POST", "/auth/login", { body: { email: bystander.email, password: PASSWORD } }),
                getWallet(bystanderToken),
                getLedger(bystanderToken),
                call("GET", "/readyz")
              ], { concurrency: "unbounded" })
              expect({ login: login.status, wallet: wallet.status, ledger: ledger.status, readyz: ready.status })
                .toEqual({ login: 200, wallet: 200, ledger: 200, readyz: 200 })
              // The bounds hold: at most 2 exports per account, 8 per process; the rest are told to come back.
              const served = statuses.filter((status) => status === 200).length
              expect(served).toBeGreaterThan(0)
              expect(served).toBeLessThanOrEqual(8)
              const refused = readers.filter((_, i) => statuses[i] !== 200)
              for (const reader of refused) {
                expect(reader.received()).toMatch(/^HTTP\/1\.1 429 /)
                expect(reader.received()).toMatch(/\r\nretry-after: \d+\r\n/i)
                expect(reader.received()).toContain("\"code\":\"rate_limited\"")
              }
              for (const attacker of attackers) {
                const mine = readers.filter((_, i) => Math.floor(i / 8) === attackers.indexOf(attacker))
                const servedToMe = mine.filter((_, i) => statuses[attackers.indexOf(attacker) * 8 + i] === 200)
                expect(servedToMe.length).toBeLessThanOrEqual(2)
              }
            }).pipe(Effect.ensuring(releasing(readers)))
          }),
        60_000
      )

      it.effect(
        "a reader that stops reading is cut off once nothing moved for the stall limit",
        () =>
          Effect.gen(function*() {
            const port = yield* serverPort
            const member = yield* memberWithLedger(ROWS)
            const reader = slowGet(port, CSV, { token: member.token, bytesPerSecond: 0 })
            yield* Effect.gen(function*() {
              expect(yield* Effect.promise(() => reader.status)).toBe(200)
              yield* Effect.sleep(`${STALL_SECONDS + 2} seconds`)
              // Reading again, it finds the answer cut where the server gave up, not the rest of the ledger.
              reader.resume()
              const closed = yield* Effect.promise(() => reader.closed).pipe(Effect.timeout("30 seconds"))
              expect(closed.aborted).toBe(true)
              // Its slot is free again: the same member exports in full.
              const whole = yield* Effect.promise(() => fullGet(port, CSV, member.token))
              expect(whole.status).toBe(200)
              expect(whole.complete).toBe(true)
              expect(whole.body.split("\r\n").length).toBe(ROWS + 1 + 1 + 1)
            }).pipe(Effect.ensuring(releasing([reader])))
          }),
        60_000
      )
    })

    describe("a connection that dies mid-export (22.2)", () => {
      it.effect(
        "backends terminated mid-stream: the reader gets every row or an aborted response, and the pool serves after",
        () =>
          Effect.gen(function*() {
            const port = yield* serverPort
            const member = yield* memberWithLedger(ROWS)
            const reader = slowGet(port, CSV, { token: member.token, bytesPerSecond: 0 })
            yield* Effect.gen(function*() {
              expect(yield* Effect.promise(() => reader.status)).toBe(200)
              yield* Effect.sleep("500 millis")
              yield* terminateServiceBackends
              // The export goes on as its reader reads again: it ends, whole or cut, and never hangs.
              reader.resume()
              const closed = yield* Effect.promise(() => reader.closed).pipe(Effect.timeout("20 seconds"))
              if (!closed.aborted) expect(reader.received().split("credit ").length).toBe(ROWS + 1)
              // A new export after the loss reads every row.
              const whole = yield* Effect.promise(() => fullGet(port, CSV, member.token))
              expect(whole.status).toBe(200)
              expect(whole.complete).toBe(true)
              expect(whole.body.split("\r\n").length).toBe(ROWS + 3)
              const replies = yield* Effect.all(
                Array.from({ length: 24 }, () => getWallet(member.token)),
                { concurrency: "unbounded" }
              )
              expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 200))
            }).pipe(Effect.ensuring(releasing([reader])))
          }),
        60_000
      )

      it.effect(
        "an export whose statement fails after the header is aborted, never ended as a clean CSV",
        () =>
          Effect.gen(function*() {
            const port = yield* serverPort
            const member = yield* memberWithLedger(ROWS)
            const sql = yield* SqlClient.SqlClient
            const reader = slowGet(port, CSV, { token: member.token, bytesPerSecond: 0 })
            yield* Effect.gen(function*() {
              expect(yield* Effect.promise(() => reader.status)).toBe(200)
              // The next page's statement waits on this lock, and its backend is then terminated.
              yield* sql.withTransaction(Effect.gen(function*() {
                yield* sql`LOCK TABLE ledger_entries IN ACCESS EXCLUSIVE MODE`
                reader.resume()
                yield* Effect.sleep("1 second")
                yield* sql`
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`
              })).pipe(Effect.orDie)
              const closed = yield* Effect.promise(() => reader.closed).pipe(Effect.timeout("20 seconds"))
              expect(closed.aborted).toBe(true)
              expect(reader.received()).toMatch(/^HTTP\/1\.1 200 /)
              const replies = yield* Effect.all(
                Array.from({ length: 24 }, () => getWallet(member.token)),
                { concurrency: "unbounded" }
              )
              expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 200))
            }).pipe(Effect.ensuring(releasing([reader])))
          }),
        60_000
      )

      it.effect("a cell that begins with a tab or a carriage return is exported with a leading ' (22.10)", () =>
        Effect.gen(function*() {
          const user = yield* createUser()
          const token = yield* signIn(user.email)
          expect((yield* putBudget(token, { budget_usd: "5", idempotency_key: newKey(), note: "\tcmd|calc" })).status)
            .toBe(200)
          expect(
            (yield* putBudget(token, {
              budget_usd: "6",
              expected_version: 1,
              idempotency_key: newKey(),
              note: "\r=1+1"
            })).status
          ).toBe(200)
          const rows = String((yield* call("GET", CSV, { token })).body).split("\r\n")
          // The note is followed by the entry's repository and user (D16), empty on a budget entry, its
          // model and labels (D19), empty and {}, and its grants (D21), [].
          expect(rows[1]).toMatch(/,'\tcmd\|calc,,,,\{\},\[\]$/)
          expect(rows[2]).toMatch(/,"'\r=1\+1",,,,\{\},\[\]$/)
        }))

      it.effect("from=0000-01-01T00:00:00Z is 422 at #/query/from, not a 200 with only the header", () =>
        Effect.gen(function*() {
          const user = yield* createUser()
          const token = yield* signIn(user.email)
          expect((yield* putBudget(token, { budget_usd: "5", idempotency_key: newKey() })).status).toBe(200)
          const reply = yield* call("GET", `${CSV}?from=0000-01-01T00:00:00Z`, { token })
          expect(reply.status).toBe(422)
          expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/query/from" }] })
          const early = yield* call("GET", `${CSV}?from=0001-01-01T00:00:00Z`, { token })
          expect(early.status).toBe(200)
          expect(String(early.body).split("\r\n").length).toBe(3)
        }))

      it.effect(
        "SIGTERM of an API process whose export readers stopped reading exits within the drain limit",
        // The stall limit is left at its default (30 s): only the drain limit can end these answers.
        () => sigtermWithStalledExports("export-stalled", Effect.void),
        60_000
      )

      it.effect(
        "SIGTERM of an API process whose export lost its backend exits within the drain limit",
        () =>
          sigtermWithStalledExports(
            "export-api",
            Effect.zipRight(Effect.sleep("500 millis"), terminateServiceBackends)
          ),
        60_000
      )
    })
  }
)
