import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as Money from "../src/Domain/Money.js"
import type { SessionState } from "../src/Domain/SettlementSession.js"
import type { UsedConcurrencyLimit, UsedLimit, UsedSpendLimit } from "../src/Domain/SpendLimit.js"
import { usedLimitOfColumns } from "../src/Domain/SpendLimit.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { isOpenSession } from "../src/Settlement/Limits.js"
import { type Decision, type Plan, plan } from "../src/Settlement/Plan.js"
import { planJobs } from "./support/planJobs.js"

/**
 * D19's rules without a database (docs/decisions/D19-fleet-controls.md): concurrency limits
 * counted as the batch opens and closes sessions, label scopes, warnings once per limit,
 * percentage and period (once per session for a session limit), raises that end by themselves,
 * and what a refused reserve could have taken.
 */

const ACCOUNT = "0190f1a2-7c3e-7000-8000-000000000001"
const NOW = new Date("2026-03-10T12:00:00.000Z")
const PERIOD_START = new Date("2026-03-10T00:00:00.000Z")
const TTL_MS = 86_400_000
const usd = Money.decimal

const { release, reserve, spend } = planJobs(ACCOUNT)

let ids = 0
const spendLimit = (
  scope: UsedSpendLimit["scope"],
  amount: string,
  options: {
    readonly scope_id?: string
    readonly used?: string
    readonly warn?: ReadonlyArray<number>
    readonly raise?: { readonly amount: string; readonly until: Date }
  } = {}
): UsedLimit =>
  usedLimitOfColumns({
    id: `limit-${++ids}`,
    scope,
    scope_id: options.scope_id ?? null,
    applies_to: null,
    period: scope === "session" ? "session" : "day",
    window_minutes: null,
    amount_usd: usd(amount),
    raise_amount_usd: options.raise === undefined ? null : usd(options.raise.amount),
    raise_until: options.raise?.until ?? null,
    used_usd: usd(options.used ?? "0"),
    warn_at_percent: options.warn ?? [],
    max_open_sessions: null,
    open_sessions: null,
    period_start: scope === "session" ? null : PERIOD_START,
    period_end: scope === "session" ? null : new Date(PERIOD_START.getTime() + 86_400_000),
    leaving: []
  }, NOW)

const concurrent = (
  scope: UsedConcurrencyLimit["scope"],
  max: number,
  options: { readonly scope_id?: string; readonly open?: number } = {}
): UsedConcurrencyLimit => ({
  kind: "concurrent",
  id: `limit-${++ids}`,
  scope,
  scope_id: options.scope_id ?? null,
  applies_to: null,
  period: "concurrent",
  window_minutes: null,
  max_open_sessions: max,
  open_sessions: options.open ?? 0
})

const openSession = (session_id: string, held: string, labels: Record<string, string> = {}): SessionState => ({
  session_id,
  task_id: null,
  held: usd(held),
  spent: Money.zero,
  unfunded: Money.zero,
  state: "open",
  expires_at: new Date(NOW.getTime() + TTL_MS),
  repository_id: null,
  user_id: null,
  max_usd: null,
  labels,
  warned_percent: 0,
  earmarks: []
})

const run = (
  jobs: ReadonlyArray<SettlementJob>,
  options: {
    readonly limits?: ReadonlyArray<UsedLimit>
    readonly sessions?: ReadonlyArray<SessionState>
    readonly enforced?: boolean
    readonly budget?: string
    readonly announced?: ReadonlySet<string>
  } = {}
): Plan => {
  const sessions = options.sessions ?? []
  return plan({
    balances: {
      budget: usd(options.budget ?? "1000"),
      reserved: sessions.reduce((sum, s) => sum.plus(s.held), Money.zero),
      spent: Money.zero
    },
    enforced: options.enforced ?? false,
    sessions: new Map(sessions.map((s) => [s.session_id, s])),
    firstOutcomes: new Map(),
    jobs,
    now: NOW,
    reservationTtlMs: TTL_MS,
    limits: options.limits ?? [],
    ...(options.announced === undefined ? {} : { announced: options.announced })
  })
}

const outcomes = (result: Plan) =>
  result.decisions.map((decision) => decision._tag === "Decided" ? decision.first.outcome : decision._tag)

const decided = (result: Plan, index: number) => {
  const decision: Decision | undefined = result.decisions[index]
  if (decision?._tag !== "Decided") throw new Error(`decision ${index} is ${decision?._tag}`)
  return decision.first
}

const reservable = (result: Plan, index: number) => {
  const most = decided(result, index).max_reservable_usd
  return most === null ? null : Money.format(most)
}

const warnings = (result: Plan) =>
  result.notices.flatMap((notice) =>
    notice._tag === "LimitApproaching"
      ? [{ percent: notice.percent, session: notice.session_id }]
      : notice._tag === "LimitReached"
      ? [{ percent: 100, session: null }]
      : []
  )

describe("concurrency limits", () => {
  it("a session may not open while its scope has the maximum open; one already open is never refused", () => {
    const limit = concurrent("account", 2, { open: 1 })
    const result = run([reserve("a", "1"), reserve("b", "1"), reserve("c", "1"), reserve("old", "1")], {
      limits: [limit],
      sessions: [openSession("old", "1")]
    })
    expect(outcomes(result)).toEqual(["applied", "limit_reached", "limit_reached", "applied"])
    expect(decided(result, 1).limit).toEqual({ ...limit, open_sessions: 2 })
    expect(reservable(result, 1)).toBe("0.000000")
  })

  it("a session closed in the batch frees its place for the next one", () => {
    const result = run([reserve("a", "1"), reserve("b", "1"), release("a"), reserve("b", "1")], {
      limits: [concurrent("account", 1)]
    })
    expect(outcomes(result)).toEqual(["applied", "limit_reached", "applied", "applied"])
  })

  it("a label's limit counts only the sessions carrying its label; a refused session never counts", () => {
    const limit = concurrent("label", 1, { scope_id: "team=infra" })
    const result = run([
      reserve("i1", "1", { labels: { team: "infra" } }),
      reserve("i2", "1", { labels: { team: "infra" } }),
      reserve("w1", "1", { labels: { team: "web" } }),
      reserve("w2", "1")
    ], { limits: [limit] })
    expect(outcomes(result)).toEqual(["applied", "limit_reached", "applied", "applied"])
    const refused = result.sessions.get("i2")
    expect(refused === undefined ? undefined : isOpenSession(refused)).toBe(false)
  })

  it("labels are set by the first reserve: a later one may omit them, not name others", () => {
    const result = run([
      reserve("s", "1", { labels: { team: "infra" } }),
      reserve("s", "1"),
      reserve("s", "1", { labels: { team: "infra" } }),
      reserve("s", "1", { labels: { team: "web" } })
    ])
    expect(outcomes(result)).toEqual(["applied", "applied", "applied", "Refused"])
    expect(result.sessions.get("s")?.labels).toEqual({ team: "infra" })
  })
})

describe("warnings before a limit", () => {
  it("each percentage once per period, however many reserves cross it, then limit.reached", () => {
    const limit = spendLimit("account", "10", { warn: [50, 80] })
    const result = run(Array.from({ length: 12 }, (_, i) => reserve(`s${i}`, "1")), { limits: [limit] })
    expect(outcomes(result).filter((o) => o === "applied")).toHaveLength(10)
    expect(warnings(result)).toEqual([{ percent: 50, session: null }, { percent: 80, session: null }, {
      percent: 100,
      session: null
    }])
    const [first] = result.notices.filter((notice) => notice._tag === "LimitApproaching")
    expect(first?._tag === "LimitApproaching" ? first.period_start : undefined).toEqual(PERIOD_START)
  })

  it("one reserve that jumps past several percentages announces each; what a period announced is not again", () => {
    const limit = spendLimit("account", "10", { warn: [25, 50, 75] })
    expect(warnings(run([reserve("s", "6")], { limits: [limit] })).map((w) => w.percent)).toEqual([25, 50])
    const announced = new Set([`${limit.id}/25`])
    expect(warnings(run([reserve("s", "6")], { limits: [limit], announced })).map((w) => w.percent)).toEqual([50])
  })

  it("a release lowers the use but never announces; a spend beyond its hold can cross", () => {
    const limit = spendLimit("account", "10", { warn: [50], used: "4" })
    const result = run([release("s"), reserve("t", "0.5"), spend("t", "2")], {
      limits: [limit],
      sessions: [openSession("s", "1")]
    })
    expect(warnings(result)).toEqual([{ percent: 50, session: null }])
  })

  it("a session limit warns once per session and percentage, kept with the session", () => {
    const limit = spendLimit("session", "4", { warn: [50] })
    const result = run([reserve("a", "1"), reserve("a", "1.5"), reserve("a", "0.5"), reserve("b", "3")], {
      limits: [limit]
    })
    expect(warnings(result)).toEqual([{ percent: 50, session: "a" }, { percent: 50, session: "b" }])
    expect(result.sessions.get("a")?.warned_percent).toBe(50)
  })
})

describe("temporary raises", () => {
  it("enforce the raised amount until `until`, the base amount after", () => {
    const during = spendLimit("account", "1", { raise: { amount: "3", until: new Date(NOW.getTime() + 1) } })
    const ended = spendLimit("account", "1", { raise: { amount: "3", until: NOW } })
    expect(outcomes(run([reserve("s", "2.5")], { limits: [during] }))).toEqual(["applied"])
    const refused = run([reserve("s", "2.5")], { limits: [ended] })
    expect(outcomes(refused)).toEqual(["limit_reached"])
    expect(reservable(refused, 0)).toBe("1.000000")
  })
})

describe("what a refusal could have taken", () => {
  it("the least of the funds, the session's caps and the limits in its scope", () => {
    const limits = [spendLimit("account", "10", { used: "6" }), spendLimit("session", "3")]
    const byLimit = run([reserve("s", "5")], { limits, enforced: true, budget: "100" })
    expect(reservable(byLimit, 0)).toBe("3.000000")
    const byCap = run([reserve("s", "1", { max_usd: "2.5" }), reserve("s", "2")], { limits })
    expect(reservable(byCap, 1)).toBe("1.500000")
    const byFunds = run([reserve("s", "2")], { limits, enforced: true, budget: "1.25" })
    expect(outcomes(byFunds)).toEqual(["insufficient_funds"])
    expect(reservable(byFunds, 0)).toBe("1.250000")
  })

  it("is exactly the largest reserve that would apply", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2000 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 3000 }),
        (usedCents, limitCents, capCents, budgetCents) => {
          const cents = (n: number) => (n / 100).toFixed(2)
          const limits = [spendLimit("account", cents(limitCents + usedCents), { used: cents(usedCents) })]
          const options = { limits, enforced: true, budget: cents(budgetCents) }
          const terms = { max_usd: cents(capCents) }
          const refused = run([reserve("s", "100000", terms)], options)
          const most = decided(refused, 0).max_reservable_usd ?? Money.zero
          if (most.gt(0)) expect(outcomes(run([reserve("s", Money.format(most), terms)], options))).toEqual(["applied"])
          const more = most.plus("0.01")
          expect(outcomes(run([reserve("s", Money.format(more), terms)], options))).not.toEqual(["applied"])
        }
      ),
      { numRuns: 200 }
    )
  })
})
