import { SqlClient, Statement } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { DateTime, Effect, Layer } from "effect"
import { Accounts } from "../src/Accounts.js"
import { Account } from "../src/Domain/Account.js"
import { Wallets } from "../src/Wallets.js"
import { call, type Reply, signedInUser, TestApp } from "./support/TestApp.js"
import { getLedger, getWallet, newKey, pageOf, putBudget } from "./support/Wallets.js"

/**
 * D19, balances in the past: `GET /developer/account/wallet/as-of?time=` answers the balances
 * after the last ledger entry at or before the time (the latest `created_at` to the millisecond,
 * ties by the greatest sequence), over HTTP as clients ask it, on a wallet of a million entries
 * and on one whose entries are stamped as transactions stamp them (ties, one out of order).
 */

const TestLayer = Wallets.Default.pipe(Layer.provideMerge(TestApp()))

const PATH = "/developer/account/wallet/as-of"

const asOf = (token: string, time?: string) =>
  call("GET", time === undefined ? PATH : `${PATH}?time=${encodeURIComponent(time)}`, { token })

const FIELDS = ["as_of", "budget_usd", "reserved_usd", "spent_usd", "available_usd", "entry_id", "sequence"]

const ZEROS = {
  budget_usd: "0.000000",
  reserved_usd: "0.000000",
  spent_usd: "0.000000",
  available_usd: "0.000000",
  entry_id: null,
  sequence: 0
}

interface EntryAfter {
  readonly entry_id: string
  readonly sequence: number
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly available_usd: string
}

/** An entry's after-values read straight from the table, by its sequence: what the answer must be. */
const entryAfter = (walletId: string, sequence: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<EntryAfter>`
      SELECT id AS entry_id, sequence::integer AS sequence, budget_after_usd::text AS budget_usd,
        reserved_after_usd::text AS reserved_usd, spent_after_usd::text AS spent_usd,
        available_after_usd::text AS available_usd
      FROM ledger_entries WHERE wallet_id = ${walletId} AND sequence = ${sequence}`
    if (row === undefined) return yield* Effect.dieMessage(`no entry ${sequence} in wallet ${walletId}`)
    return row
  }).pipe(Effect.orDie)

const walletIdOf = (accountId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ readonly id: string }>`SELECT id FROM wallets WHERE account_id = ${accountId}`
    if (row === undefined) return yield* Effect.dieMessage(`no wallet for ${accountId}`)
    return row.id
  }).pipe(Effect.orDie)

/** The wallet row made to match its newest entry, as the writer leaves it. */
const catchUpWallet = (walletId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`
      UPDATE wallets w SET budget_usd = e.budget_after_usd, reserved_usd = e.reserved_after_usd,
        spent_usd = e.spent_after_usd, last_sequence = e.sequence, enforced = true, version = 1
      FROM (SELECT sequence, budget_after_usd, reserved_after_usd, spent_after_usd FROM ledger_entries
            WHERE wallet_id = ${walletId} ORDER BY sequence DESC LIMIT 1) e
      WHERE w.id = ${walletId}`).pipe(Effect.orDie)

const iso = (millis: number) => new Date(millis).toISOString()

const expectAnswer = (reply: Reply, asOfTime: string, expected: EntryAfter | typeof ZEROS) => {
  expect(reply.status, asOfTime).toBe(200)
  expect(reply.body, asOfTime).toStrictEqual({ as_of: asOfTime, ...expected })
}

const expectRefused = (reply: Reply, detail?: string) => {
  expect(reply.status).toBe(422)
  expect(reply.body).toMatchObject({
    type: "about:blank",
    status: 422,
    code: "validation_failed",
    errors: [{ pointer: "#/query/time", ...(detail === undefined ? {} : { detail }) }]
  })
}

/**
 * A million entries in one statement, 100 ms apart from BASE (entry n at BASE + n × 100 ms):
 * a budget of 100,000, then sessions that reserve 0.05, spend 0.03 of it and release the rest,
 * each row with the balances after it, as the table's checks and D7 ask.
 */
const ENTRIES = 1_000_000
const BASE = Date.parse("2025-01-01T00:00:00.000Z")
const STEP_MS = 100
/** Whichever test comes first loads the million entries: seconds on a quiet machine, more on a busy one. */
const LOAD_TIMEOUT = 240_000

const loadMillion = (walletId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`
      INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
        spent_after_usd, available_after_usd, session_id, created_at)
      SELECT ${walletId}, n, kind, amount, 100000, held, spent, 100000 - held - spent, session,
        ${iso(BASE)}::timestamptz + n * ${STEP_MS}::integer * interval '1 millisecond'
      FROM (
        SELECT n,
          CASE WHEN n = 1 THEN 'budget_set' ELSE (ARRAY['reserve', 'spend', 'reserve_release'])[(n - 2) % 3 + 1] END
            ::ledger_entry_kind AS kind,
          CASE WHEN n = 1 THEN 100000 ELSE (ARRAY[0.05, 0.03, 0.02])[(n - 2) % 3 + 1] END AS amount,
          CASE WHEN n = 1 THEN 0 ELSE (ARRAY[0.05, 0.02, 0])[(n - 2) % 3 + 1] END AS held,
          CASE WHEN n = 1 THEN 0 ELSE 0.03 * ((n - 2) / 3 + CASE (n - 2) % 3 WHEN 0 THEN 0 ELSE 1 END) END AS spent,
          CASE WHEN n = 1 THEN NULL ELSE 'as-of-' || (n - 2) / 3 END AS session
        FROM generate_series(1, ${ENTRIES}::integer) AS n
      ) movement`.pipe(
      Effect.zipRight(catchUpWallet(walletId)),
      Effect.zipRight(sql`ANALYZE ledger_entries`),
      Effect.orDie
    ))

/** The deep wallet, loaded once for the tests that read it. */
let deep: { readonly token: string; readonly account: Account; readonly walletId: string } | undefined
const deepWallet = Effect.gen(function*() {
  if (deep !== undefined) return deep
  const user = yield* signedInUser()
  expect((yield* getWallet(user.token)).status).toBe(200)
  const walletId = yield* walletIdOf(user.id)
  yield* loadMillion(walletId)
  deep = { token: user.token, account: new Account({ kind: "user", id: user.id }), walletId }
  return deep
})

layer(TestLayer, { excludeTestServices: true, timeout: "300 seconds" })("GET /developer/account/wallet/as-of", (it) => {
  describe("on a wallet of a million entries", () => {
    it.effect(
      "between entries, exactly at one, and after the last, it answers that entry's balances",
      () =>
        Effect.gen(function*() {
          const { token, walletId } = yield* deepWallet
          const at = (sequence: number) => BASE + sequence * STEP_MS
          for (const sequence of [1, 2, 3, 4, 333_334, 500_000, 777_777, 999_998, 999_999, ENTRIES]) {
            const expected = yield* entryAfter(walletId, sequence)
            // Halfway to the next entry, and at the very millisecond of this one.
            for (const time of [iso(at(sequence) + STEP_MS / 2), iso(at(sequence))]) {
              expectAnswer(yield* asOf(token, time), time, expected)
            }
          }
          const now = iso(Date.now())
          expectAnswer(yield* asOf(token, now), now, yield* entryAfter(walletId, ENTRIES))
          // The answer is the row's own: 100,000 budget, a session's hold, the sessions' spends.
          expect(yield* entryAfter(walletId, 500_000)).toMatchObject({
            budget_usd: "100000.000000",
            reserved_usd: "0.050000",
            spent_usd: "4999.980000",
            available_usd: "94999.970000"
          })
        }),
      { timeout: LOAD_TIMEOUT }
    )

    it.effect("before the first entry it answers zeros, no entry and sequence 0", () =>
      Effect.gen(function*() {
        const { token } = yield* deepWallet
        // The first entry is at BASE + 100 ms: the millisecond before it, and long before.
        for (const time of [iso(BASE + STEP_MS - 1), "2001-01-01T00:00:00.000Z"]) {
          expectAnswer(yield* asOf(token, time), time, ZEROS)
        }
      }), { timeout: LOAD_TIMEOUT })

    it.effect(
      "its statement is one probe of the time index, even as a generic plan: no Seq Scan, no Sort",
      () =>
        Effect.gen(function*() {
          const { account } = yield* deepWallet
          const wallets = yield* Wallets
          const sql = yield* SqlClient.SqlClient
          // The statement the repository sends, as it sends it, taken on its way to the database.
          const statements: Array<readonly [string, ReadonlyArray<unknown>]> = []
          yield* wallets.asOf(account, DateTime.unsafeMake(BASE + 500_000 * STEP_MS)).pipe(
            Statement.withTransformer((statement) =>
              Effect.sync(() => {
                statements.push(statement.compile())
                return statement
              })
            )
          )
          const [text, parameters] = statements.find(([text]) => text.includes("ledger_entries")) ?? ["", []]
          expect(parameters).toHaveLength(3)
          const literals = parameters.map((value) => `'${String(value).replace(/'/g, "''")}'`).join(", ")
          // A prepared statement planned once for any parameter: what a plan cache would reuse.
          const plan = yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`SET LOCAL plan_cache_mode = force_generic_plan`
            yield* sql.unsafe(`PREPARE as_of AS ${text}`)
            const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(
              `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE as_of(${literals})`
            )
            yield* sql.unsafe("DEALLOCATE as_of")
            return rows.map((row) => row["QUERY PLAN"]).join("\n")
          }))
          expect(plan).toMatch(/Index Scan Backward using ledger_entries_wallet_time_idx on ledger_entries/)
          expect(plan).not.toMatch(/Seq Scan|Sort/)
          // It read one entry of the million, and a handful of pages.
          expect(plan).toMatch(
            /Index Scan Backward using ledger_entries_wallet_time_idx[^\n]*\(actual rows=1 loops=1\)/
          )
          const executed = plan.split(/\nPlanning/)[0] ?? ""
          const buffers = [...executed.matchAll(/Buffers: shared (?:hit=(\d+))? ?(?:read=(\d+))?/g)]
            .map(([, hit, read]) => Number(hit ?? 0) + Number(read ?? 0))
          expect(buffers.length).toBeGreaterThan(0)
          expect(Math.max(...buffers)).toBeLessThan(40)
        }),
      { timeout: LOAD_TIMEOUT }
    )
  })

  describe("on entries stamped as transactions stamp them", () => {
    /**
     * An organisation's wallet, five entries: 2 and 3 from one transaction (one time), 4 from a
     * transaction that began before 3's and waited for the wallet's lock (stamped earlier), 1 and
     * 5 a fraction of a millisecond after the millisecond they show.
     */
    const stamped = Effect.gen(function*() {
      const accounts = yield* Accounts
      const sql = yield* SqlClient.SqlClient
      const organisation = yield* accounts.createOrganisation("As of")
      const ada = yield* signedInUser({ organisationId: organisation.id })
      const bob = yield* signedInUser({ organisationId: organisation.id })
      expect((yield* getWallet(ada.token)).status).toBe(200)
      const walletId = yield* walletIdOf(organisation.id)
      yield* sql`
        INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
          spent_after_usd, available_after_usd, created_at)
        SELECT ${walletId}, sequence, kind::ledger_entry_kind, amount, budget, 0, 0, budget, created_at::timestamptz
        FROM (VALUES
          (1, 'budget_set', 10, 10, '2025-06-01T00:00:00.000100Z'),
          (2, 'credit_added', 5, 15, '2025-06-01T00:00:01.000000Z'),
          (3, 'credit_added', 1, 16, '2025-06-01T00:00:01.000000Z'),
          (4, 'credit_added', 1, 17, '2025-06-01T00:00:00.500000Z'),
          (5, 'credit_added', 1, 18, '2025-06-01T00:00:02.999999Z')
        ) AS e (sequence, kind, amount, budget, created_at)`.pipe(Effect.orDie)
      yield* catchUpWallet(walletId)
      return { ada, bob, walletId }
    })

    it.effect("the latest created_at wins, ties by the greatest sequence, each at the millisecond it shows", () =>
      Effect.gen(function*() {
        const { ada, bob, walletId } = yield* stamped
        const cases: ReadonlyArray<readonly [string, number]> = [
          ["2025-06-01T00:00:00.000Z", 1],
          ["2025-06-01T00:00:00.499Z", 1],
          ["2025-06-01T00:00:00.500Z", 4],
          ["2025-06-01T00:00:00.999Z", 4],
          ["2025-06-01T00:00:01.000Z", 3],
          ["2025-06-01T00:00:02.998Z", 3],
          ["2025-06-01T00:00:02.999Z", 5]
        ]
        for (const [time, sequence] of cases) {
          const expected = yield* entryAfter(walletId, sequence)
          // Any member of the account reads the account's wallet.
          expectAnswer(yield* asOf(ada.token, time), time, expected)
          expectAnswer(yield* asOf(bob.token, time), time, expected)
        }
        expectAnswer(yield* asOf(ada.token, "2025-05-31T23:59:59.999Z"), "2025-05-31T23:59:59.999Z", ZEROS)
      }))

    it.effect("the time comes back in UTC to the millisecond, and the fields in their order", () =>
      Effect.gen(function*() {
        const { ada, walletId } = yield* stamped
        const reply = yield* asOf(ada.token, "2025-06-01T02:00:01+02:00")
        expectAnswer(reply, "2025-06-01T00:00:01.000Z", yield* entryAfter(walletId, 3))
        expect(Object.keys(reply.body as object)).toEqual(FIELDS)
        const finer = yield* asOf(ada.token, "2025-06-01T00:00:02.9995Z")
        expectAnswer(finer, "2025-06-01T00:00:02.999Z", yield* entryAfter(walletId, 5))
      }))
  })

  describe("an account without a wallet", () => {
    it.effect("answers zeros at any past time, and reading does not create the wallet", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const sql = yield* SqlClient.SqlClient
        const now = iso(Date.now())
        const reply = yield* asOf(user.token, now)
        expectAnswer(reply, now, ZEROS)
        expect(Object.keys(reply.body as object)).toEqual(FIELDS)
        expect(yield* sql`SELECT id FROM wallets WHERE account_id = ${user.id}`).toHaveLength(0)
      }))
  })

  describe("refusals", () => {
    it.effect("a malformed, zoneless, missing or future time is 422 at #/query/time, and nothing changes", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const reader = yield* signedInUser()
        const fresh = yield* signedInUser()
        const put = yield* putBudget(reader.token, { budget_usd: "25", idempotency_key: newKey() })
        expect(put.status).toBe(200)
        const wallet = yield* getWallet(reader.token)
        const ledger = yield* getLedger(reader.token)
        const malformed = "must be an ISO 8601 time between the years 0001 and 9999, such as 2026-01-31T00:00:00Z"
        for (const token of [reader.token, fresh.token]) {
          expectRefused(yield* asOf(token, "yesterday"), malformed)
          expectRefused(yield* asOf(token, "2025-06-01T00:00:00"), malformed)
          expectRefused(yield* asOf(token, "2025-06-01"), malformed)
          expectRefused(yield* asOf(token, "0000-12-31T00:00:00Z"), malformed)
          expectRefused(yield* asOf(token, ""), malformed)
          expectRefused(yield* asOf(token), "is required")
          expectRefused(yield* asOf(token, iso(Date.now() + 3_600_000)), "must not be later than now")
          expectRefused(yield* asOf(token, "9999-12-31T23:59:59Z"), "must not be later than now")
        }
        expect(yield* getWallet(reader.token)).toMatchObject({ status: 200, body: wallet.body })
        expect(pageOf(yield* getLedger(reader.token)).entries).toEqual(pageOf(ledger).entries)
        expect(yield* sql`SELECT id FROM wallets WHERE account_id = ${fresh.id}`).toHaveLength(0)
      }))

    it.effect("without a token it is 401", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", `${PATH}?time=2025-06-01T00:00:00Z`)
        expect(reply.status).toBe(401)
        expect(reply.body).toMatchObject({ code: "unauthenticated" })
      }))
  })
})
