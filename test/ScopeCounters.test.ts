import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import type { Account } from "../src/Domain/Account.js"
import { Settlement } from "../src/Settlement.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * The counters by scope key (docs/decisions/D16-spend-controls.md, "A limit's use by scope key")
 * follow the running totals and the open sessions exactly, and `ledger verify` (D13) names one
 * that does not.
 */

const job = (account: Account, kind: "reserve" | "spend" | "release", session: string, extra: object = {}) =>
  ({
    kind,
    payload: { account_id: account.id, session_id: session, idempotency_key: randomUUID(), ...extra }
  }) as SettlementJob

layer(Books.Default.pipe(Layer.provideMerge(TestSettlement())), { excludeTestServices: true, timeout: "60 seconds" })(
  "counters by scope key",
  (it) => {
    describe("kept by the batch, checked by verify", () => {
      it.effect("labelled sessions move their keys' counters; a tampered counter is a mismatch", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const settlement = yield* Settlement
          const books = yield* Books
          const account = yield* newAccount("100")
          const labels = { team: "search", run: "r-1" }
          for (const session of ["a", "b"]) {
            yield* settlement.apply(job(account, "reserve", session, { amount_usd: "5", labels }))
            yield* settlement.apply(job(account, "spend", session, { amount_usd: "2", model: "m" }))
          }
          yield* settlement.apply(job(account, "release", "b"))
          const counters = yield* sql<{ scope: string; scope_key: string; held: string; open: number }>`
            SELECT h.scope, h.scope_key, h.held_usd::text AS held, h.open_sessions AS open
            FROM settlement_scope_holds h JOIN wallets w ON w.id = h.wallet_id
            WHERE w.account_id = ${account.id} ORDER BY h.scope, h.scope_key`
          expect(counters).toEqual([
            { scope: "account", scope_key: "", held: "3.000000", open: 1 },
            { scope: "label", scope_key: "run=r-1", held: "3.000000", open: 1 },
            { scope: "label", scope_key: "team=search", held: "3.000000", open: 1 }
          ])
          const spent = yield* sql<{ scope_key: string; spent: string }>`
            SELECT t.scope_key, t.spent_usd::text AS spent FROM settlement_scope_totals t
            JOIN wallets w ON w.id = t.wallet_id WHERE w.account_id = ${account.id} ORDER BY t.scope_key`
          expect(spent).toEqual([
            { scope_key: "", spent: "4.000000" },
            { scope_key: "run=r-1", spent: "4.000000" },
            { scope_key: "team=search", spent: "4.000000" }
          ])
          expect((yield* books.verify(Option.some(account.id))).mismatches).toEqual([])

          yield* sql`
            UPDATE settlement_scope_holds SET held_usd = held_usd + 1
            WHERE scope_key = 'run=r-1' AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id})`
          const { mismatches } = yield* books.verify(Option.some(account.id))
          expect(mismatches).toMatchObject([{
            check: "scope_counters",
            counter: { scope: "label", scope_key: "run=r-1", day: null },
            expected: { held_usd: "3.000000", open_sessions: 1 },
            found: { held_usd: "4.000000", open_sessions: 1 }
          }])
        }).pipe(Effect.orDie))
    })
  }
)
