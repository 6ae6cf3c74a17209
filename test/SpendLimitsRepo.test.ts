import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Settlement } from "../src/Settlement.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { SpendLimitsRepo } from "../src/SpendControls/LimitsRepo.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * The one read of a limit's use (D16, docs/decisions/D16-spend-controls.md): spends booked in the
 * limit's current UTC period by the sessions in its scope, plus the holds they have open now.
 */

const apply = (job: SettlementJob) => Effect.flatMap(Settlement, (settlement) => settlement.apply(job))
const reserve = (account: Account, session_id: string, amount_usd: string): SettlementJob => ({
  kind: "reserve",
  payload: { account_id: account.id, session_id, amount_usd, idempotency_key: randomUUID() }
})

const saveLimits = (
  account: Account,
  limits: ReadonlyArray<{ scope: string; scope_id: string | null; period: string; amount_usd: string }>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO spend_limit_sets (account_kind, account_id, version) VALUES (${account.kind}, ${account.id}, 1)`
    for (const limit of limits) {
      yield* sql`INSERT INTO spend_limits (account_kind, account_id, scope, scope_id, period, amount_usd)
                 VALUES (${account.kind}, ${account.id}, ${limit.scope}, ${limit.scope_id}, ${limit.period}, ${limit.amount_usd})`
    }
  }).pipe(Effect.orDie)

layer(SpendLimitsRepo.Default.pipe(Layer.provideMerge(TestSettlement())), {
  excludeTestServices: true,
  timeout: "60 seconds"
})("SpendLimitsRepo.findUsed", (it) => {
  describe("used_usd and the period's bounds", () => {
    it.effect("counts the period's spends in scope and the holds open now; a session limit its largest open session", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* SpendLimitsRepo
        const account = yield* newAccount("1000")
        const repository = randomUUID()
        yield* apply(reserve(account, "s-repo", "10"))
        yield* apply(reserve(account, "s-other", "4"))
        yield* sql`UPDATE settlement_sessions SET repository_id = ${repository}, spent_usd = 3
                   WHERE session_id = 's-repo' AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id})`
        const walletId = (yield* sql<{ id: string }>`SELECT id FROM wallets WHERE account_id = ${account.id}`)[0]?.id
        // Spends of today (in the period), of a repository and not, and of last month (outside it).
        yield* sql`INSERT INTO settlement_spend_totals (wallet_id, day, repository_id, user_id, spent_usd, sessions) VALUES
          (${walletId}, '2026-03-10', ${repository}, NULL, 2.5, 1),
          (${walletId}, '2026-03-10', NULL, NULL, 1, 1),
          (${walletId}, '2026-02-28', ${repository}, NULL, 100, 1)`
        yield* saveLimits(account, [
          { scope: "account", scope_id: null, period: "month", amount_usd: "50" },
          { scope: "repository", scope_id: repository, period: "day", amount_usd: "20" },
          { scope: "repository", scope_id: repository, period: "week", amount_usd: "200" },
          { scope: "user", scope_id: randomUUID(), period: "month", amount_usd: "5" },
          { scope: "session", scope_id: null, period: "session", amount_usd: "30" }
        ])
        const [found] = yield* repo.findUsed([account], new Date("2026-03-10T15:00:00Z"))
        const byKey = new Map(
          (found?.limits ?? []).flatMap((limit) =>
            limit.kind === "spend" ? [[`${limit.scope}/${limit.period}`, limit]] : []
          )
        )
        const used = (key: string) => Money.format(byKey.get(key)?.used_usd ?? Money.decimal("-1"))
        // The wallet holds 14; this month's spends are 3.5.
        expect(used("account/month")).toBe("17.500000")
        // The repository's session holds 10; today it spent 2.5 (last month's 100 is another period).
        expect(used("repository/day")).toBe("12.500000")
        expect(used("repository/week")).toBe("12.500000")
        expect(used("user/month")).toBe("0.000000")
        // The largest open session: 10 held + 3 spent.
        expect(used("session/session")).toBe("13.000000")
        expect(byKey.get("repository/week")?.period_start?.toISOString()).toBe("2026-03-09T00:00:00.000Z")
        expect(byKey.get("account/month")?.period_end?.toISOString()).toBe("2026-04-01T00:00:00.000Z")
        expect(byKey.get("session/session")?.period_start).toBeNull()
        // The week of 2 March does not hold the 10th's spends.
        const [earlier] = yield* repo.findUsed([account], new Date("2026-03-08T15:00:00Z"))
        const week = earlier?.limits.find((limit) => limit.period === "week")
        expect(week?.kind === "spend" ? Money.format(week.used_usd) : null).toBe("10.000000")
      }))

    it.effect("an account without limits is absent; one without a wallet uses nothing", () =>
      Effect.gen(function*() {
        const repo = yield* SpendLimitsRepo
        const bare = yield* newAccount()
        expect(yield* repo.findUsed([bare], new Date())).toEqual([])
        yield* saveLimits(bare, [{ scope: "account", scope_id: null, period: "day", amount_usd: "1" }])
        const [found] = yield* repo.findUsed([bare], new Date())
        expect(found?.limits.map((limit) => limit.kind === "spend" ? Money.format(limit.used_usd) : null)).toEqual([
          "0.000000"
        ])
        expect((yield* repo.findSets([bare])).map((set) => set.version)).toEqual([1])
      }))
  })
})
