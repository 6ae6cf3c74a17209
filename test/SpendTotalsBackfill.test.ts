import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { inject } from "vitest"
import { migrations } from "../migrations/index.js"
import { Books } from "../src/Books.js"
import { adminQuery, databaseUrl } from "./support/databases.js"

/**
 * Migration 0014 on books made before it (D16, docs/decisions/D16-spend-controls.md): the
 * running spend totals are filled from the spends already booked, unattributed, per UTC day,
 * so `ledger verify` is green on them. A database of its own, migrated to 0013, holds a wallet
 * whose sessions spent over two days, within and beyond their holds.
 */

const WALLET = "0190f1a2-7c3e-7000-8000-0000000000aa"
const ACCOUNT = "0190f1a2-7c3e-7000-8000-0000000000bb"

/** A fresh database, dropped with the scope; its name lets a later run drop it if this one is killed. */
const privateDatabase = Effect.acquireRelease(
  Effect.promise(async () => {
    const template = inject("templateDatabase")
    const name = `account_api_test_${template.split("_")[3]}_backfill_${randomBytes(4).toString("hex")}`
    await adminQuery(`CREATE DATABASE "${name}"`)
    return name
  }),
  (name) => Effect.promise(() => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
)

const before0014 = Object.entries(migrations).filter(([name]) => name < "0014").map(([, migration]) => migration)
const after0014 = Object.entries(migrations).filter(([name]) => name >= "0015").map(([, migration]) => migration)

describe("migration 0014's backfill of the running spend totals", () => {
  it.scoped(
    "fills them from earlier spends, per UTC day, unfunded replayed, each session once; verify is green",
    () =>
      Effect.gen(function*() {
        const name = yield* privateDatabase
        const client = PgClient.layer({ url: Redacted.make(databaseUrl(name)), maxConnections: 2 })
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          for (const migration of before0014) yield* sql.withTransaction(migration)
          // Day 1: session s-1 reserves 10, spends 4 and 8 (6 from the hold, 2 beyond it).
          // Day 2: s-1 spends 1 more (all beyond), s-2 reserves 5 and spends 1.
          yield* sql`
          INSERT INTO wallets (id, account_kind, account_id, budget_usd, reserved_usd, spent_usd, enforced, version, last_sequence)
          VALUES (${WALLET}, 'user', ${ACCOUNT}, 100, 4, 14, true, 1, 7)`
          const entries = [
            [1, "budget_set", "100", "100", "0", "0", null, "2026-03-01T10:00:00Z"],
            [2, "reserve", "10", "100", "10", "0", "s-1", "2026-03-01T10:01:00Z"],
            [3, "spend", "4", "100", "6", "4", "s-1", "2026-03-01T10:02:00Z"],
            [4, "spend", "8", "100", "0", "12", "s-1", "2026-03-01T23:59:59Z"],
            [5, "spend", "1", "100", "0", "13", "s-1", "2026-03-02T00:00:00Z"],
            [6, "reserve", "5", "100", "5", "13", "s-2", "2026-03-02T09:00:00Z"],
            [7, "spend", "1", "100", "4", "14", "s-2", "2026-03-02T09:30:00Z"]
          ] as const
          for (const [sequence, kind, amount, budget, reserved, spent, session, at] of entries) {
            yield* sql`
            INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
              spent_after_usd, available_after_usd, session_id, created_at)
            VALUES (${WALLET}, ${sequence}, ${kind}::ledger_entry_kind, ${amount}, ${budget}, ${reserved}, ${spent},
              ${Number(budget) - Number(reserved) - Number(spent)}, ${session}, ${at}::timestamptz)`
          }
          yield* sql`
          INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, unfunded_usd, state, expires_at)
          VALUES (${WALLET}, 's-1', 0, 13, 3, 'open', now() + interval '1 day'),
                 (${WALLET}, 's-2', 4, 1, 0, 'open', now() + interval '1 day')`

          yield* sql.withTransaction(migrations["0014_spend_controls"])

          const totals = yield* sql<
            { day: string; repository_id: null; spent_usd: string; unfunded_usd: string; sessions: number }
          >`
          SELECT day::text AS day, repository_id, spent_usd::text AS spent_usd, unfunded_usd::text AS unfunded_usd, sessions
          FROM settlement_spend_totals WHERE wallet_id = ${WALLET} ORDER BY day`
          expect(totals).toEqual([
            { day: "2026-03-01", repository_id: null, spent_usd: "12.000000", unfunded_usd: "2.000000", sessions: 1 },
            { day: "2026-03-02", repository_id: null, spent_usd: "2.000000", unfunded_usd: "1.000000", sessions: 1 }
          ])
          // The books as they are read now: the later migrations (D19's model and labels among them) first.
          for (const migration of after0014) yield* sql.withTransaction(migration)
          const verdict = yield* Effect.flatMap(Books, (books) => books.verify(Option.some(ACCOUNT)))
          expect(verdict).toEqual({ wallets: 1, entries: 7, mismatches: [] })
        }).pipe(Effect.provide(Books.Default.pipe(Layer.provideMerge(client))))
      }),
    60_000
  )
})
