import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { parse } from "csv-parse/sync"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { Account } from "../src/Domain/Account.js"
import { serveOn } from "../src/Http.js"
import { Settlement } from "../src/Settlement.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { call, signedInUser } from "./support/TestApp.js"
import { TestSettlement } from "./support/TestSettlement.js"
import { type EntryBody, getLedger, newKey, pageOf, postCredit, putBudget } from "./support/Wallets.js"

/** D12's sessions view and D13's export, over HTTP, on books the settlement worker wrote. */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(Layer.provideMerge(TestSettlement()))

interface SessionBody {
  readonly session_id: string
  readonly task_id: string | null
  readonly state: "open" | "closed"
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly unfunded_usd: string
  readonly opened_at: string
  readonly last_activity_at: string
  readonly expires_at: string | null
  readonly closed_reason: "released" | "expired" | null
}

interface SessionPageBody {
  readonly sessions: ReadonlyArray<SessionBody>
  readonly next_before: string | null
}

const settle = (kind: "reserve" | "spend" | "release", account: Account, session_id: string, amount_usd?: string) =>
  Effect.gen(function*() {
    const producer = yield* SettlementProducer
    const base = { account_id: account.id, session_id, idempotency_key: randomUUID() }
    const job = kind === "release"
      ? yield* producer.enqueueRelease(base)
      : kind === "reserve"
      ? yield* producer.enqueueReserve({ ...base, amount_usd: amount_usd ?? "1", task_id: `task-of-${session_id}` })
      : yield* producer.enqueueSpend({ ...base, amount_usd: amount_usd ?? "1" })
    return yield* job.result()
  }).pipe(Effect.orDie)

/** A signed-in user whose account has a budget, a session still open, one released after spending past its hold, and one expired. */
const accountWithSessions = Effect.gen(function*() {
  const user = yield* signedInUser()
  const account: Account = { kind: "user", id: user.id }
  expect((yield* putBudget(user.token, { budget_usd: "100", idempotency_key: newKey(), note: "=SUM(A1:A9)" })).status)
    .toBe(200)
  yield* settle("reserve", account, "s-released", "5")
  yield* settle("spend", account, "s-released", "7.5")
  yield* settle("release", account, "s-released")
  yield* settle("reserve", account, "s-expired", "3")
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second'
             WHERE session_id = 's-expired' AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id})`
    .pipe(
      Effect.orDie
    )
  yield* Effect.flatMap(Settlement, (settlement) => settlement.expireHolds())
  yield* settle("reserve", account, "s-open", "10")
  yield* settle("spend", account, "s-open", "2.25")
  return { ...user, account }
})

const sessionsOf = (token: string, query = "") =>
  Effect.map(
    call("GET", `/developer/account/wallet/sessions${query === "" ? "" : `?${query}`}`, { token }),
    (reply) => ({ status: reply.status, body: reply.body as SessionPageBody })
  )

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "60 seconds" })("sessions and export", (it) => {
  describe("GET /developer/account/wallet/sessions (D12)", () => {
    it.effect("lists open sessions by default, closed ones on request, newest first, with what each holds and spent", () =>
      Effect.gen(function*() {
        const user = yield* accountWithSessions
        const open = yield* sessionsOf(user.token)
        expect(open.status).toBe(200)
        expect(open.body).toEqual({
          sessions: [{
            session_id: "s-open",
            task_id: "task-of-s-open",
            state: "open",
            reserved_usd: "7.750000",
            spent_usd: "2.250000",
            unfunded_usd: "0.000000",
            opened_at: expect.any(String),
            last_activity_at: expect.any(String),
            expires_at: expect.any(String),
            closed_reason: null,
            repository_id: null,
            user_id: null,
            labels: {},
            // A reserve of it applied (D12's refused sessions are funded: false).
            funded: true
          }],
          next_before: null
        })
        const [session] = open.body.sessions
        expect(Date.parse(session?.expires_at ?? "")).toBeGreaterThan(Date.now())
        expect(Date.parse(session?.opened_at ?? "")).toBeLessThanOrEqual(Date.parse(session?.last_activity_at ?? ""))

        const closed = yield* sessionsOf(user.token, "state=closed")
        expect(closed.body.sessions.map((s) => [s.session_id, s.closed_reason, s.expires_at, s.reserved_usd])).toEqual([
          ["s-expired", "expired", null, "0.000000"],
          ["s-released", "released", null, "0.000000"]
        ])
        expect(closed.body.sessions[1]).toMatchObject({
          spent_usd: "7.500000",
          unfunded_usd: "2.500000",
          state: "closed"
        })

        // What the open sessions hold is what the wallet has reserved.
        const wallet = (yield* call("GET", "/developer/account/wallet", { token: user.token })).body
        expect(wallet).toMatchObject({ reserved_usd: "7.750000", spent_usd: "9.750000" })
      }))

    it.effect("pages with next_before until every session has been listed once", () =>
      Effect.gen(function*() {
        const user = yield* accountWithSessions
        const seen: Array<string> = []
        let before: string | null = null
        do {
          const page: { status: number; body: SessionPageBody } = yield* sessionsOf(
            user.token,
            `state=all&limit=1${before === null ? "" : `&before=${before}`}`
          )
          expect(page.status).toBe(200)
          expect(page.body.sessions).toHaveLength(1)
          seen.push(...page.body.sessions.map((s) => s.session_id))
          before = page.body.next_before
        } while (before !== null)
        expect(seen).toEqual(["s-open", "s-expired", "s-released"])
      }))

    it.effect("one session with its entries, oldest first; an unknown one, or another account's, is 404 session_not_found", () =>
      Effect.gen(function*() {
        const user = yield* accountWithSessions
        const reply = yield* call("GET", "/developer/account/wallet/sessions/s-released", { token: user.token })
        expect(reply.status).toBe(200)
        const body = reply.body as SessionBody & { entries: ReadonlyArray<EntryBody>; entries_truncated: boolean }
        expect(body).toMatchObject({ session_id: "s-released", state: "closed", entries_truncated: false })
        expect(body.entries.map((e) => [e.kind, e.amount_usd])).toEqual([
          ["reserve", "5.000000"],
          ["spend", "7.500000"]
        ])
        const other = yield* signedInUser()
        for (
          const [token, id] of [[user.token, "no-such-session"], [other.token, "s-released"]] as const
        ) {
          const missing = yield* call("GET", `/developer/account/wallet/sessions/${id}`, { token })
          expect({ status: missing.status, code: (missing.body as { code?: string }).code }).toEqual({
            status: 404,
            code: "session_not_found"
          })
        }
      }))

    it.effect("bad parameters are 422, an unknown before is 404, and nothing is needed but a token", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const query of ["state=bogus", "limit=0", "limit=501", "limit=x"]) {
          const reply = yield* sessionsOf(user.token, query)
          expect({ query, status: reply.status }).toEqual({ query, status: 422 })
        }
        expect((yield* sessionsOf(user.token, "before=nope")).status).toBe(404)
        expect(yield* sessionsOf(user.token, "state=all")).toEqual({
          status: 200,
          body: { sessions: [], next_before: null }
        })
        expect((yield* call("GET", "/developer/account/wallet/sessions")).status).toBe(401)
      }))
  })

  describe("GET /developer/account/wallet/ledger.csv (D13)", () => {
    const exportOf = (token: string, query = "") =>
      call("GET", `/developer/account/wallet/ledger.csv${query === "" ? "" : `?${query}`}`, { token })

    /** A cell as the ledger holds it: the export's formula guard taken off. */
    const unguarded = (cell: string) => /^'[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell

    it.effect("is RFC 4180 CSV that a CSV parser reads back into the ledger the JSON endpoint lists", () =>
      Effect.gen(function*() {
        const user = yield* accountWithSessions
        // Past nine entries, so that an order by the sequence's text (1, 10, 2, …) would show.
        for (let version = 1; version <= 6; version++) {
          const budget = { budget_usd: String(100 + version), expected_version: version, idempotency_key: newKey() }
          expect((yield* putBudget(user.token, budget)).status).toBe(200)
        }
        const reply = yield* exportOf(user.token)
        expect(reply.status).toBe(200)
        expect(reply.headers["content-type"]).toBe("text/csv; charset=utf-8")
        expect(reply.headers["content-disposition"]).toBe("attachment; filename=\"ledger.csv\"")
        const text = String(reply.body)
        expect(text.endsWith("\r\n")).toBe(true)
        const rows = parse(text, { columns: true }) as Array<Record<string, string>>
        expect(Object.keys(rows[0] ?? {})).toEqual([
          "id",
          "sequence",
          "created_at",
          "kind",
          "amount_usd",
          "budget_usd_after",
          "reserved_usd_after",
          "spent_usd_after",
          "available_usd_after",
          "session_id",
          "task_id",
          "idempotency_key",
          "note",
          "repository_id",
          "user_id",
          "model",
          "labels",
          "grants"
        ])
        const json = [...pageOf(yield* getLedger(user.token, "limit=500")).entries].reverse()
        expect(json.map((entry) => entry.sequence)).toEqual(json.map((_, i) => i + 1))
        expect(json.length).toBeGreaterThan(9)
        expect(rows.map((row) => ({
          id: row.id,
          sequence: Number(row.sequence),
          created_at: row.created_at,
          kind: row.kind,
          amount_usd: unguarded(row.amount_usd ?? ""),
          budget_after_usd: row.budget_usd_after,
          reserved_after_usd: row.reserved_usd_after,
          spent_after_usd: row.spent_usd_after,
          available_after_usd: unguarded(row.available_usd_after ?? ""),
          payment_provider: null,
          session_id: row.session_id === "" ? null : row.session_id,
          task_id: row.task_id === "" ? null : row.task_id,
          note: row.note === "" ? null : unguarded(row.note ?? ""),
          repository_id: row.repository_id === "" ? null : row.repository_id,
          user_id: row.user_id === "" ? null : row.user_id,
          model: row.model === "" ? null : row.model,
          labels: JSON.parse(row.labels ?? ""),
          grants: JSON.parse(row.grants ?? "")
        }))).toEqual(json)
        // Every entry names the key that moved its money; the sweep's release had none.
        expect(rows.map((row) => row.idempotency_key === "")).toEqual(rows.map((row) => row.note === "expired"))
      }))

    it.effect("appends each entry's credit grants (D21) as JSON text, [] when none, as the JSON ledger shows them", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser({ admin: true })
        const account: Account = { kind: "user", id: user.id }
        expect((yield* putBudget(user.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        const credit = yield* postCredit(user.token, { amount_usd: "20", idempotency_key: newKey() })
        expect(credit.status).toBe(200)
        const grant = (credit.body as { readonly grant: { readonly id: string } }).grant.id
        yield* settle("reserve", account, "s-granted", "5")
        yield* settle("spend", account, "s-granted", "3")
        yield* settle("release", account, "s-granted")
        const rows = parse(String((yield* exportOf(user.token)).body), { columns: true }) as Array<
          Record<string, string>
        >
        const json = [...pageOf(yield* getLedger(user.token, "limit=500")).entries]
          .reverse() as unknown as ReadonlyArray<
            EntryBody & { readonly grants: unknown }
          >
        expect(rows.map((row) => row.grants)).toEqual(json.map((entry) => JSON.stringify(entry.grants)))
        // A spend's items are shown without what of them came out of the session's earmarks.
        expect(rows.map((row) => [row.kind, JSON.parse(row.grants ?? "")])).toEqual([
          ["budget_set", []],
          ["credit_added", [{ grant_id: grant, amount_usd: "20.000000" }]],
          ["reserve", [{ grant_id: grant, amount_usd: "5.000000" }]],
          ["spend", [{ grant_id: grant, amount_usd: "3.000000" }]],
          ["reserve_release", [{ grant_id: grant, amount_usd: "2.000000" }]]
        ])
      }))

    it.effect("guards formulas and quotes what needs quoting; from is inclusive and to exclusive", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const notes = ["=SUM(A1:A9)", "+1", "@risk", "a, \"quoted\"\nnote", "plain"]
        for (const [i, note] of notes.entries()) {
          expect(
            (yield* putBudget(user.token, {
              budget_usd: String(10 + i),
              expected_version: i,
              idempotency_key: newKey(),
              note
            })).status
          ).toBe(200)
        }
        const rows = parse(String((yield* exportOf(user.token)).body), { columns: true }) as Array<
          Record<string, string>
        >
        expect(rows.map((row) => row.note)).toEqual(["'=SUM(A1:A9)", "'+1", "'@risk", "a, \"quoted\"\nnote", "plain"])

        const times = rows.map((row) => row.created_at ?? "")
        const [first, , third] = times
        const ranged = parse(String((yield* exportOf(user.token, `from=${first}&to=${third}`)).body), {
          columns: true
        }) as Array<Record<string, string>>
        expect(ranged.map((row) => row.sequence)).toEqual(
          rows.filter((row) => (row.created_at ?? "") >= (first ?? "") && (row.created_at ?? "") < (third ?? ""))
            .map((row) => row.sequence)
        )
        for (const query of ["from=yesterday", "to=2026-13-01T00:00:00Z"]) {
          expect((yield* exportOf(user.token, query)).status).toBe(422)
        }
        const empty = yield* exportOf((yield* signedInUser()).token)
        expect(String(empty.body).split("\r\n")).toHaveLength(2)
      }))
  })
})
