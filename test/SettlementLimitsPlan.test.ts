import { describe, expect, it } from "@effect/vitest"
import { DateTime } from "effect"
import fc from "fast-check"
import * as Money from "../src/Domain/Money.js"
import type { SessionState } from "../src/Domain/SettlementSession.js"
import type { UsedLimit, UsedSpendLimit } from "../src/Domain/SpendLimit.js"
import { Wallet } from "../src/Domain/Wallet.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { type Decision, type Plan, plan, resultOf } from "../src/Settlement/Plan.js"
import { planJobs } from "./support/planJobs.js"

/**
 * D16's rules without a database (docs/decisions/D16-spend-controls.md): session caps, limits
 * judged in arrival order as the batch books, attribution set by a session's first reserve, and
 * what a batch's spends add to the running totals.
 */

const ACCOUNT = "0190f1a2-7c3e-7000-8000-000000000001"
const REPO = "0190f1a2-7c3e-7000-8000-00000000000a"
const OTHER_REPO = "0190f1a2-7c3e-7000-8000-00000000000b"
const USER = "0190f1a2-7c3e-7000-8000-0000000000c1"
const NOW = new Date("2026-03-10T12:00:00.000Z")
const TTL_MS = 86_400_000
const usd = Money.decimal

const { release, reserve, spend } = planJobs(ACCOUNT)

let limitIds = 0
const limit = (
  scope: UsedLimit["scope"],
  amount: string,
  options: { readonly scope_id?: string; readonly period?: UsedSpendLimit["period"]; readonly used?: string } = {}
): UsedSpendLimit => ({
  kind: "spend",
  id: `limit-${++limitIds}`,
  scope,
  scope_id: options.scope_id ?? null,
  applies_to: null,
  period: options.period ?? (scope === "session" ? "session" : "day"),
  window_minutes: null,
  leaving: [],
  amount_usd: usd(amount),
  raise: null,
  effective_amount_usd: usd(amount),
  used_usd: usd(options.used ?? "0"),
  warn_at_percent: [],
  period_start: null,
  period_end: null
})

const session = (
  session_id: string,
  held: string,
  options: Partial<Pick<SessionState, "repository_id" | "user_id" | "max_usd">> & { readonly spent?: string } = {}
): SessionState => ({
  session_id,
  task_id: null,
  held: usd(held),
  spent: usd(options.spent ?? "0"),
  unfunded: Money.zero,
  state: "open",
  expires_at: new Date(NOW.getTime() + TTL_MS),
  repository_id: options.repository_id ?? null,
  user_id: options.user_id ?? null,
  max_usd: options.max_usd ?? null,
  labels: {},
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
  } = {}
): Plan => {
  const sessions = options.sessions ?? []
  return plan({
    balances: {
      budget: usd(options.budget ?? "1000"),
      reserved: sessions.reduce((sum, s) => sum.plus(s.held), Money.zero),
      spent: sessions.reduce((sum, s) => sum.plus(s.spent), Money.zero)
    },
    enforced: options.enforced ?? false,
    sessions: new Map(sessions.map((s) => [s.session_id, s])),
    firstOutcomes: new Map(),
    jobs,
    now: NOW,
    reservationTtlMs: TTL_MS,
    limits: options.limits ?? []
  })
}

const outcomes = (result: Plan) =>
  result.decisions.map((decision) => decision._tag === "Decided" ? decision.first.outcome : decision._tag)

const decided = (result: Plan, index: number) => {
  const decision: Decision | undefined = result.decisions[index]
  if (decision?._tag !== "Decided") throw new Error(`decision ${index} is ${decision?._tag}`)
  return decision
}

const limitOf = (result: Plan, index: number) => {
  const hit = decided(result, index).first.limit
  if (hit === null) return null
  if (hit.kind !== "spend") throw new Error("a spend limit was expected")
  // The members and windows of D22 are null for these limits of D16: named only where they apply.
  const { applies_to, kind: _, retry_after_seconds, window_minutes, ...named } = hit
  expect([applies_to, window_minutes, retry_after_seconds]).toEqual([null, null, null])
  return { ...named, amount_usd: Money.format(hit.amount_usd), used_usd: Money.format(hit.used_usd) }
}

describe("session caps (max_usd)", () => {
  it("a reserve past the session's cap is limit_reached, holds nothing, and names the cap (id null)", () => {
    const result = run([
      reserve("s-1", "6", { max_usd: "10" }),
      reserve("s-1", "5"),
      reserve("s-1", "4")
    ])
    expect(outcomes(result)).toEqual(["applied", "limit_reached", "applied"])
    expect(limitOf(result, 1)).toEqual({
      id: null,
      scope: "session",
      scope_id: null,
      period: "session",
      amount_usd: "10.000000",
      used_usd: "6.000000"
    })
    expect(result.movements.map((m) => m.kind)).toEqual(["reserve", "reserve"])
    expect(Money.format(result.sessions.get("s-1")?.held ?? Money.zero)).toBe("10.000000")
  })

  it("a refused first reserve makes its session known, with its cap and attribution", () => {
    const result = run([reserve("s-1", "11", { max_usd: "10", repository_id: REPO }), release("s-1")])
    expect(outcomes(result)).toEqual(["limit_reached", "nothing_to_release"])
    expect(result.sessions.get("s-1")).toMatchObject({ state: "released", repository_id: REPO })
    expect(result.sessions.get("s-1")?.max_usd?.eq(10)).toBe(true)
  })

  it("counts what the session spent: held + spent + the reserve may not pass the cap", () => {
    const result = run([reserve("s-1", "2.5")], {
      sessions: [session("s-1", "3", { spent: "4", max_usd: usd("9") })]
    })
    expect(outcomes(result)).toEqual(["limit_reached"])
    expect(limitOf(result, 0)?.used_usd).toBe("7.000000")
  })

  it("the account's session limit caps a session beside its own max_usd: the lower wins", () => {
    const sessionLimit = limit("session", "8")
    const result = run([
      reserve("s-own", "9", { max_usd: "20" }),
      reserve("s-plain", "8"),
      reserve("s-tight", "5", { max_usd: "4" })
    ], { limits: [sessionLimit] })
    expect(outcomes(result)).toEqual(["limit_reached", "applied", "limit_reached"])
    expect(limitOf(result, 0)).toMatchObject({ id: sessionLimit.id, scope: "session", amount_usd: "8.000000" })
    expect(limitOf(result, 2)).toMatchObject({ id: null, amount_usd: "4.000000" })
  })

  it("spends are booked in full; the first that reaches the cap and every later one carry cap_reached", () => {
    const result = run([
      reserve("s-1", "5", { max_usd: "5" }),
      spend("s-1", "3"),
      spend("s-1", "2"),
      spend("s-1", "1.5")
    ])
    expect(outcomes(result)).toEqual(["applied", "applied", "applied", "applied"])
    expect([1, 2, 3].map((i) => decided(result, i).first.cap_reached)).toEqual([false, true, true])
    expect(Money.format(decided(result, 3).first.unfunded_usd ?? Money.zero)).toBe("1.500000")
  })

  it("a session limit's cap_reached holds for sessions without max_usd", () => {
    const result = run([spend("s-1", "2")], {
      sessions: [session("s-1", "0", { spent: "5" })],
      limits: [limit("session", "6")]
    })
    expect(decided(result, 0).first.cap_reached).toBe(true)
  })
})

describe("limits of the account, a repository and a user", () => {
  it("reserves are judged in arrival order against what the batch has booked", () => {
    const accountLimit = limit("account", "10", { used: "1" })
    const result = run([reserve("a", "4"), reserve("b", "4"), reserve("c", "4"), reserve("d", "1")], {
      limits: [accountLimit]
    })
    expect(outcomes(result)).toEqual(["applied", "applied", "limit_reached", "applied"])
    expect(limitOf(result, 2)).toEqual({
      id: accountLimit.id,
      scope: "account",
      scope_id: null,
      period: "day",
      amount_usd: "10.000000",
      used_usd: "9.000000"
    })
  })

  it("holds on unenforced and enforced wallets alike, and before funds are looked at", () => {
    const limits = [limit("account", "5")]
    expect(outcomes(run([reserve("a", "6")], { limits, enforced: false }))).toEqual(["limit_reached"])
    expect(outcomes(run([reserve("a", "6")], { limits, enforced: true, budget: "1" }))).toEqual(["limit_reached"])
    expect(outcomes(run([reserve("a", "2")], { limits, enforced: true, budget: "1" }))).toEqual([
      "insufficient_funds"
    ])
  })

  it("a repository or user limit counts only its sessions", () => {
    const repoLimit = limit("repository", "5", { scope_id: REPO, period: "week" })
    const userLimit = limit("user", "3", { scope_id: USER, period: "month" })
    const result = run([
      reserve("r-1", "4", { repository_id: REPO }),
      reserve("other", "50", { repository_id: OTHER_REPO }),
      reserve("r-2", "2", { repository_id: REPO }),
      reserve("u-1", "3", { user_id: USER, repository_id: OTHER_REPO }),
      reserve("u-2", "0.5", { user_id: USER })
    ], { limits: [repoLimit, userLimit] })
    expect(outcomes(result)).toEqual(["applied", "applied", "limit_reached", "applied", "limit_reached"])
    expect(limitOf(result, 2)).toMatchObject({ id: repoLimit.id, scope_id: REPO, used_usd: "4.000000" })
    expect(limitOf(result, 4)).toMatchObject({ id: userLimit.id, scope: "user", used_usd: "3.000000" })
  })

  it("a spend adds to a limit only what it takes beyond its hold; a release frees what it returns", () => {
    const accountLimit = limit("account", "10", { used: "6" })
    const result = run([
      spend("s-1", "4"),
      reserve("s-2", "4"),
      spend("s-1", "3"),
      reserve("s-3", "1"),
      release("s-2"),
      reserve("s-3", "3")
    ], { sessions: [session("s-1", "6")], limits: [accountLimit] })
    // 6 used: the 4 spent from the hold moves nothing; the reserve of 4 fits exactly (10); 3 beyond
    // the hold of 2 adds 1 (11): the next reserve is refused; the release frees 4 (7): 3 fits.
    expect(outcomes(result)).toEqual(["applied", "applied", "applied", "limit_reached", "applied", "applied"])
    expect(limitOf(result, 3)?.used_usd).toBe("11.000000")
  })
})

describe("attribution", () => {
  it("is set by a session's first reserve and carried on its entries; a later reserve may omit it", () => {
    const result = run([
      reserve("s-1", "1", { repository_id: REPO, user_id: USER }),
      reserve("s-1", "1"),
      spend("s-1", "3"),
      release("s-1")
    ])
    // The spend of 3 took the whole hold of 2: the release finds nothing to return.
    expect(outcomes(result)).toEqual(["applied", "applied", "applied", "nothing_to_release"])
    expect(result.movements.map((m) => "repository_id" in m ? [m.repository_id, m.user_id] : null)).toEqual([
      [REPO, USER],
      [REPO, USER],
      [REPO, USER]
    ])
    expect(result.spendTotals).toMatchObject([{ repository_id: REPO, user_id: USER, sessions: 1 }])
  })

  it("a later reserve naming another repository, user or cap is session_attribution_mismatch, booking nothing", () => {
    const result = run([
      reserve("s-1", "1", { repository_id: REPO }),
      reserve("s-1", "1", { repository_id: OTHER_REPO }),
      reserve("s-1", "1", { user_id: USER }),
      reserve("s-1", "1", { max_usd: "5" }),
      reserve("s-1", "1", { repository_id: REPO })
    ])
    expect(result.decisions.map((d) => d._tag === "Refused" ? d.code : d._tag)).toEqual([
      "Decided",
      "session_attribution_mismatch",
      "session_attribution_mismatch",
      "session_attribution_mismatch",
      "Decided"
    ])
    expect(result.decisions[1]).toMatchObject({ reason: expect.stringMatching(/^session_attribution_mismatch: /) })
    expect(result.movements).toHaveLength(2)
  })
})

describe("running totals", () => {
  it("a batch's spends by attribution, each session counted once, at its first spend", () => {
    const result = run([
      reserve("r-1", "2", { repository_id: REPO }),
      spend("r-1", "1"),
      spend("r-1", "3"),
      spend("old", "2"),
      reserve("plain", "1"),
      spend("plain", "0.5")
    ], { sessions: [session("old", "0", { spent: "1", repository_id: REPO })] })
    expect(result.spendTotals.map((t) => ({
      repository_id: t.repository_id,
      user_id: t.user_id,
      spent: Money.format(t.spent),
      unfunded: Money.format(t.unfunded),
      sessions: t.sessions
    }))).toEqual([
      { repository_id: REPO, user_id: null, spent: "6.000000", unfunded: "4.000000", sessions: 1 },
      { repository_id: null, user_id: null, spent: "0.500000", unfunded: "0.000000", sessions: 1 }
    ])
  })
})

describe("the job's result", () => {
  it("carries the limit of a limit_reached reserve and cap_reached of a spend, amounts as D6", () => {
    const result = run([
      reserve("s-1", "3", { max_usd: "2" }),
      reserve("s-2", "2", { max_usd: "2" }),
      spend("s-2", "1"),
      spend("s-2", "1")
    ])
    const wallet = new Wallet({
      id: "w",
      owner_kind: "user",
      owner_id: ACCOUNT,
      currency: "USD",
      budget_usd: Money.zero,
      reserved_usd: Money.zero,
      spent_usd: Money.zero,
      available_usd: Money.zero,
      enforced: false,
      version: 0,
      created_at: DateTime.unsafeFromDate(NOW),
      updated_at: DateTime.unsafeFromDate(NOW)
    })
    const answer = (index: number) => resultOf(decided(result, index), ["e-1", "e-2", "e-3"], [], wallet)
    expect(answer(0)).toMatchObject({
      status: "limit_reached",
      entry_ids: [],
      limit: {
        id: null,
        scope: "session",
        scope_id: null,
        period: "session",
        amount_usd: "2.000000",
        used_usd: "0.000000"
      }
    })
    expect(answer(0)).not.toHaveProperty("cap_reached")
    expect(answer(2)).not.toHaveProperty("cap_reached")
    expect(answer(3)).toMatchObject({ status: "applied", cap_reached: true, unfunded_usd: "0.000000" })
    // A duplicate answers the first outcome again, limit and cap_reached included.
    const duplicate = (index: number) => ({ ...decided(result, index), _tag: "Duplicate" as const })
    expect(resultOf(duplicate(0), [], [], wallet)).toMatchObject({
      status: "duplicate",
      first_status: "limit_reached",
      limit: { amount_usd: "2.000000" }
    })
    expect(resultOf(duplicate(3), [], [], wallet)).toMatchObject({ first_status: "applied", cap_reached: true })
  })
})

describe("properties", () => {
  it("no reserve ever takes a limit's use past its amount; only spends beyond their holds can", () => {
    const job = fc.oneof(
      fc.record({
        kind: fc.constant("reserve" as const),
        session: fc.integer({ min: 0, max: 4 }),
        cents: fc.integer({ min: 1, max: 900 }),
        repo: fc.boolean()
      }),
      fc.record({
        kind: fc.constant("spend" as const),
        session: fc.integer({ min: 0, max: 4 }),
        cents: fc.integer({ min: 1, max: 900 }),
        repo: fc.constant(false)
      }),
      fc.record({
        kind: fc.constant("release" as const),
        session: fc.integer({ min: 0, max: 4 }),
        cents: fc.constant(0),
        repo: fc.constant(false)
      })
    )
    fc.assert(
      fc.property(fc.array(job, { maxLength: 40 }), fc.integer({ min: 1, max: 3000 }), (specs, limitCents) => {
        const accountLimit = limit("account", (limitCents / 100).toFixed(2))
        const repoLimit = limit("repository", (limitCents / 200).toFixed(2), { scope_id: REPO })
        // A session's repository is the first reserve's: sessions 0 and 1 belong to REPO.
        const jobs = specs.map((spec) => {
          const id = `s-${spec.session}`
          const amount = (spec.cents / 100).toFixed(2)
          return spec.kind === "reserve"
            ? reserve(id, amount, spec.session < 2 ? { repository_id: REPO } : {})
            : spec.kind === "spend"
            ? spend(id, amount)
            : release(id)
        })
        const result = run(jobs, { limits: [accountLimit, repoLimit] })
        // Replay the movements: use = holds + spends; each applied reserve leaves both limits within.
        let accountUsed = Money.zero
        let repoUsed = Money.zero
        const held = new Map<string, Money.Decimal>()
        const ofRepo = new Set<string>()
        result.decisions.forEach((decision) => {
          if (decision._tag !== "Decided" || decision.first.outcome !== "applied") return
          const entries = decision.first.entries._tag === "Planned" ? decision.first.entries.indexes : []
          for (const index of entries) {
            const movement = result.movements[index]
            if (
              movement === undefined || movement.kind === "budget_set" || movement.kind === "credit_added" ||
              movement.kind === "credit_expired" || movement.kind === "credit_voided"
            ) continue
            const sid = movement.session_id
            if (movement.repository_id === REPO) ofRepo.add(sid)
            const before = held.get(sid) ?? Money.zero
            let delta = Money.zero
            if (movement.kind === "reserve") {
              delta = movement.amount_usd
              held.set(sid, before.plus(delta))
            } else if (movement.kind === "reserve_release") {
              delta = movement.amount_usd.negated()
              held.set(sid, Money.zero)
            } else {
              delta = movement.amount_usd.minus(movement.from_reserved_usd)
              held.set(sid, before.minus(movement.from_reserved_usd))
            }
            accountUsed = accountUsed.plus(delta)
            if (ofRepo.has(sid)) repoUsed = repoUsed.plus(delta)
            if (movement.kind === "reserve") {
              expect(accountUsed.lte(accountLimit.amount_usd)).toBe(true)
              if (ofRepo.has(sid)) expect(repoUsed.lte(repoLimit.amount_usd)).toBe(true)
            }
          }
        })
      }),
      { numRuns: 300 }
    )
  })
})
