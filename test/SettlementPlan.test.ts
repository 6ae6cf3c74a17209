import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import * as Money from "../src/Domain/Money.js"
import { applyMovement, available, type Balances, type Movement } from "../src/Domain/Movement.js"
import { REFUSAL_CODES, refusalCodeOf, refusalMessage } from "../src/Domain/SettlementSession.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import {
  type Decision,
  fingerprintOf,
  type FirstOutcome,
  type Plan,
  plan,
  type SessionState
} from "../src/Settlement/Plan.js"

const ACCOUNT = "0190f1a2-7c3e-7000-8000-000000000001"
const NOW = new Date("2026-03-01T12:00:00.000Z")
const TTL_MS = 86_400_000

/** The sessions a plan changed, but one. */
const withoutSession = <A>(sessions: ReadonlyMap<string, A>, sessionId: string) =>
  new Map([...sessions].filter(([id]) => id !== sessionId))

const usd = Money.decimal

let keys = 0
const nextKey = () => `k-${++keys}`

const reserve = (
  session_id: string,
  amount_usd: string,
  idempotency_key = nextKey(),
  task_id?: string
): SettlementJob => ({
  kind: "reserve",
  payload: {
    account_id: ACCOUNT,
    session_id,
    amount_usd,
    idempotency_key,
    ...(task_id === undefined ? {} : { task_id })
  }
})
const spend = (session_id: string, amount_usd: string, idempotency_key = nextKey()): SettlementJob => ({
  kind: "spend",
  payload: { account_id: ACCOUNT, session_id, amount_usd, idempotency_key }
})
const release = (session_id: string, idempotency_key = nextKey()): SettlementJob => ({
  kind: "release",
  payload: { account_id: ACCOUNT, session_id, idempotency_key }
})

const session = (
  session_id: string,
  held: string,
  options: { readonly spent?: string; readonly state?: SessionState["state"]; readonly task_id?: string } = {}
): SessionState => ({
  session_id,
  task_id: options.task_id ?? null,
  held: usd(held),
  spent: usd(options.spent ?? "0"),
  unfunded: usd("0"),
  state: options.state ?? "open",
  expires_at: new Date(NOW.getTime() - 1000),
  repository_id: null,
  user_id: null,
  max_usd: null,
  labels: {},
  warned_percent: 0,
  earmarks: []
})

interface Wallet {
  readonly budget?: string
  readonly reserved?: string
  readonly spent?: string
  readonly enforced?: boolean
  readonly sessions?: ReadonlyArray<SessionState>
  readonly firstOutcomes?: ReadonlyArray<readonly [string, FirstOutcome]>
}

const run = (wallet: Wallet, jobs: ReadonlyArray<SettlementJob>): Plan =>
  plan({
    balances: {
      budget: usd(wallet.budget ?? "0"),
      reserved: usd(wallet.reserved ?? "0"),
      spent: usd(wallet.spent ?? "0")
    },
    enforced: wallet.enforced ?? false,
    sessions: new Map((wallet.sessions ?? []).map((s) => [s.session_id, s])),
    firstOutcomes: new Map(wallet.firstOutcomes ?? []),
    jobs,
    now: NOW,
    reservationTtlMs: TTL_MS
  })

const formatted = (balances: Balances) => ({
  budget: Money.format(balances.budget),
  reserved: Money.format(balances.reserved),
  spent: Money.format(balances.spent),
  available: Money.format(available(balances))
})

const movementView = (movement: Movement) => {
  switch (movement.kind) {
    case "spend":
      return {
        kind: movement.kind,
        amount: Money.format(movement.amount_usd),
        from_hold: Money.format(movement.from_reserved_usd),
        session: movement.session_id
      }
    case "reserve":
    case "reserve_release":
    case "credit_added":
      return { kind: movement.kind, amount: Money.format(movement.amount_usd) }
    case "budget_set":
      return { kind: movement.kind, amount: Money.format(movement.budget_usd) }
  }
}

/**
 * A decision as a job sees it, independent of its position in the batch: the
 * outcome and the movements it booked (planned indexes resolved), or why it waits.
 */
const view = (result: Plan, decision: Decision) => {
  if (decision._tag === "Retry" || decision._tag === "Refused") {
    return { tag: decision._tag, key: decision.job.payload.idempotency_key, reason: decision.reason }
  }
  const entries = decision.first.entries._tag === "Stored"
    ? { stored: decision.first.entries.ids }
    : {
      booked: decision.first.entries.indexes.map((index) => {
        const movement = result.movements[index]
        return movement === undefined ? "missing" : movementView(movement)
      })
    }
  return {
    tag: decision._tag,
    key: decision.job.payload.idempotency_key,
    outcome: decision.first.outcome,
    unfunded: decision.first.unfunded_usd === null ? null : Money.format(decision.first.unfunded_usd),
    ...entries
  }
}

const views = (result: Plan) => result.decisions.map((decision) => view(result, decision))

const decisionAt = (result: Plan, index: number): Decision => {
  const decision = result.decisions[index]
  if (decision === undefined) throw new Error(`no decision at ${index}`)
  return decision
}

describe("settlement rules", () => {
  describe("reserve", () => {
    it("on an enforced wallet with enough available, holds the amount for the session", () => {
      const job = reserve("s-1", "2.5", "k-reserve", "task-1")
      const result = run({ budget: "10", enforced: true }, [job])
      expect(views(result)).toEqual([
        {
          tag: "Decided",
          key: "k-reserve",
          outcome: "applied",
          unfunded: null,
          booked: [{ kind: "reserve", amount: "2.500000" }]
        }
      ])
      expect(result.movements).toMatchObject([{ kind: "reserve", session_id: "s-1", task_id: "task-1" }])
      expect(formatted(result.balances)).toEqual({
        budget: "10.000000",
        reserved: "2.500000",
        spent: "0.000000",
        available: "7.500000"
      })
      expect(result.sessions.get("s-1")).toEqual({
        session_id: "s-1",
        task_id: "task-1",
        held: usd("2.5"),
        spent: Money.zero,
        unfunded: Money.zero,
        state: "open",
        expires_at: new Date(NOW.getTime() + TTL_MS),
        repository_id: null,
        user_id: null,
        max_usd: null,
        labels: {},
        warned_percent: 0,
        earmarks: []
      })
    })

    it("of exactly what is available is held", () => {
      const result = run(
        { budget: "10", reserved: "4", spent: "3.5", enforced: true, sessions: [session("s-0", "4")] },
        [reserve("s-1", "2.5")]
      )
      expect(decisionAt(result, 0)).toMatchObject({ _tag: "Decided", first: { outcome: "applied" } })
      expect(formatted(result.balances).available).toBe("0.000000")
    })

    it("on a wallet that is not enforced, is held even beyond the budget", () => {
      const result = run({ budget: "1", enforced: false }, [reserve("s-1", "5")])
      expect(decisionAt(result, 0)).toMatchObject({ _tag: "Decided", first: { outcome: "applied" } })
      expect(formatted(result.balances)).toEqual({
        budget: "1.000000",
        reserved: "5.000000",
        spent: "0.000000",
        available: "-4.000000"
      })
    })

    it("on an enforced wallet without enough available, is insufficient_funds and leaves balances and sessions untouched", () => {
      const wallet = { budget: "10", reserved: "3", spent: "6", enforced: true, sessions: [session("s-1", "3")] }
      const result = run(wallet, [reserve("s-1", "1.000001", "k-short")])
      expect(views(result)).toEqual([{
        tag: "Decided",
        key: "k-short",
        outcome: "insufficient_funds",
        unfunded: null,
        booked: []
      }])
      expect(result.movements).toEqual([])
      expect(result.sessions.size).toBe(0)
      expect(formatted(result.balances)).toEqual({
        budget: "10.000000",
        reserved: "3.000000",
        spent: "6.000000",
        available: "1.000000"
      })
    })

    it("on an over-spent enforced wallet, any reserve is insufficient_funds", () => {
      const result = run({ budget: "1", spent: "2", enforced: true }, [reserve("s-1", "0.000001")])
      expect(decisionAt(result, 0)).toMatchObject({ first: { outcome: "insufficient_funds" } })
    })

    it("a second reserve of a session adds to its hold, keeps its task and renews its expiry", () => {
      const held = session("s-1", "2", { spent: "1", task_id: "task-1" })
      const result = run({ budget: "10", reserved: "2", spent: "1", enforced: true, sessions: [held] }, [
        reserve("s-1", "3")
      ])
      expect(result.sessions.get("s-1")).toEqual({
        ...held,
        held: usd("5"),
        expires_at: new Date(NOW.getTime() + TTL_MS)
      })
      expect(formatted(result.balances).reserved).toBe("5.000000")
      expect(result.movements).toMatchObject([{ kind: "reserve", task_id: "task-1" }])
    })

    it("two reserves of a new session in one batch add up", () => {
      const result = run({ budget: "10", enforced: true }, [reserve("s-1", "1"), reserve("s-1", "2")])
      expect(result.sessions.get("s-1")?.held).toEqual(usd("3"))
      expect(result.movements).toHaveLength(2)
    })

    it("later reserves in a batch see the funds earlier ones took", () => {
      const result = run({ budget: "5", enforced: true }, [
        reserve("a", "2"),
        reserve("b", "2"),
        reserve("c", "2"),
        reserve("d", "1")
      ])
      expect(result.decisions.map((d) => "first" in d ? d.first.outcome : d._tag)).toEqual([
        "applied",
        "applied",
        "insufficient_funds",
        "applied"
      ])
      expect(formatted(result.balances).available).toBe("0.000000")
    })
  })

  describe("spend", () => {
    it("within the hold moves the amount from the hold to spent, with nothing unfunded", () => {
      const result = run({ budget: "10", reserved: "4", enforced: true, sessions: [session("s-1", "4")] }, [
        spend("s-1", "1.25", "k-spend")
      ])
      expect(views(result)).toEqual([{
        tag: "Decided",
        key: "k-spend",
        outcome: "applied",
        unfunded: "0.000000",
        booked: [{ kind: "spend", amount: "1.250000", from_hold: "1.250000", session: "s-1" }]
      }])
      expect(formatted(result.balances)).toEqual({
        budget: "10.000000",
        reserved: "2.750000",
        spent: "1.250000",
        available: "6.000000"
      })
      expect(result.sessions.get("s-1")).toMatchObject({ held: usd("2.75"), spent: usd("1.25"), state: "open" })
    })

    it("beyond the hold charges the rest directly, says how much was unfunded, and may take available below zero", () => {
      const result = run({ budget: "3", reserved: "2", enforced: true, sessions: [session("s-1", "2")] }, [
        spend("s-1", "5")
      ])
      expect(views(result)[0]).toMatchObject({
        outcome: "applied",
        unfunded: "3.000000",
        booked: [{ kind: "spend", amount: "5.000000", from_hold: "2.000000" }]
      })
      expect(formatted(result.balances)).toEqual({
        budget: "3.000000",
        reserved: "0.000000",
        spent: "5.000000",
        available: "-2.000000"
      })
      expect(result.sessions.get("s-1")).toMatchObject({ held: Money.zero, spent: usd("5") })
    })

    it("after the hold was released is booked in full as unfunded", () => {
      const released = session("s-1", "0", { state: "released", spent: "1" })
      const result = run({ budget: "10", spent: "1", enforced: true, sessions: [released] }, [spend("s-1", "0.5")])
      expect(views(result)[0]).toMatchObject({
        outcome: "applied",
        unfunded: "0.500000",
        booked: [{ from_hold: "0.000000" }]
      })
      expect(result.sessions.get("s-1")).toMatchObject({ state: "released", held: Money.zero, spent: usd("1.5") })
    })

    it("for a session never seen is retried, booking nothing", () => {
      const result = run({ budget: "10", enforced: true }, [spend("ghost", "1", "k-ghost")])
      expect(views(result)).toEqual([{ tag: "Retry", key: "k-ghost", reason: "session ghost is not known yet" }])
      expect(result.movements).toEqual([])
      expect(result.sessions.size).toBe(0)
    })

    it("for a session whose reserve comes earlier in the same batch, applies", () => {
      const result = run({ budget: "10", enforced: true }, [reserve("s-1", "2"), spend("s-1", "1")])
      expect(result.decisions.map((d) => d._tag)).toEqual(["Decided", "Decided"])
      expect(formatted(result.balances)).toMatchObject({ reserved: "1.000000", spent: "1.000000" })
    })
  })

  describe("release", () => {
    it("returns the whole remaining hold and closes the session", () => {
      const held = session("s-1", "3", { spent: "1" })
      const result = run({ budget: "10", reserved: "3", spent: "1", enforced: true, sessions: [held] }, [
        release("s-1", "k-release")
      ])
      expect(views(result)).toEqual([{
        tag: "Decided",
        key: "k-release",
        outcome: "applied",
        unfunded: null,
        booked: [{ kind: "reserve_release", amount: "3.000000" }]
      }])
      expect(result.sessions.get("s-1")).toEqual({ ...held, held: Money.zero, state: "released" })
      expect(formatted(result.balances)).toEqual({
        budget: "10.000000",
        reserved: "0.000000",
        spent: "1.000000",
        available: "9.000000"
      })
    })

    it("with nothing held is nothing_to_release, booking nothing; an open session closes all the same (D12)", () => {
      for (const state of ["open", "released", "expired"] as const) {
        const result = run({ budget: "10", enforced: true, sessions: [session("s-1", "0", { state })] }, [
          release("s-1", "k-empty")
        ])
        expect(views(result)).toEqual([{
          tag: "Decided",
          key: "k-empty",
          outcome: "nothing_to_release",
          unfunded: null,
          booked: []
        }])
        expect(result.movements).toEqual([])
        expect([...result.sessions.values()].map((s) => s.state)).toEqual(state === "open" ? ["released"] : [])
      }
    })

    it("twice in one batch releases once; the second has nothing to release", () => {
      const result = run({ reserved: "3", sessions: [session("s-1", "3")] }, [release("s-1"), release("s-1")])
      expect(result.decisions.map((d) => "first" in d ? d.first.outcome : d._tag)).toEqual([
        "applied",
        "nothing_to_release"
      ])
      expect(result.movements).toHaveLength(1)
    })

    it("for a session never seen is retried, booking nothing", () => {
      const result = run({ budget: "10" }, [release("ghost")])
      expect(decisionAt(result, 0)).toMatchObject({ _tag: "Retry", reason: "session ghost is not known yet" })
      expect(result.movements).toEqual([])
    })
  })

  describe("idempotency keys", () => {
    it("a key repeated within one batch is a duplicate of the first decision, booking nothing more", () => {
      const first = reserve("s-1", "2", "k-same")
      const again = reserve("s-1", "2", "k-same")
      const result = run({ budget: "10", enforced: true }, [first, spend("s-1", "1"), again])
      const decided = decisionAt(result, 0)
      expect(decided).toMatchObject({ _tag: "Decided", job: first })
      expect(decisionAt(result, 2)).toEqual({
        _tag: "Duplicate",
        job: again,
        first: "first" in decided ? decided.first : undefined
      })
      expect(result.movements).toHaveLength(2)
      expect(result.sessions.get("s-1")?.held).toEqual(usd("1"))
    })

    it("a key repeated within one batch answers the first outcome even when it was a refusal; the amount compares as a number", () => {
      const refused = reserve("s-1", "20", "k-refused")
      const result = run({ budget: "10", enforced: true }, [refused, reserve("s-1", "20.000000", "k-refused")])
      expect(views(result).map((v) => [v.tag, "outcome" in v ? v.outcome : undefined])).toEqual([
        ["Decided", "insufficient_funds"],
        ["Duplicate", "insufficient_funds"]
      ])
      expect(result.movements).toEqual([])
    })

    it("a key used by another job (kind, session or amount) is refused as idempotency_key_reused, booking nothing", () => {
      const first = reserve("s-1", "2", "k-shared")
      const result = run({ budget: "10", enforced: true }, [
        first,
        spend("s-1", "2", "k-shared"),
        reserve("s-2", "2", "k-shared"),
        reserve("s-1", "3", "k-shared"),
        release("s-1", "k-shared")
      ])
      expect(views(result).map((v) => v.tag)).toEqual(["Decided", "Refused", "Refused", "Refused", "Refused"])
      for (const decision of result.decisions.slice(1)) {
        expect(decision).toMatchObject({ reason: expect.stringMatching(/^idempotency_key_reused/) })
      }
      expect(result.movements).toHaveLength(1)
    })

    it("a key stored from an earlier batch is refused for another job too", () => {
      const stored: FirstOutcome = {
        job: fingerprintOf(reserve("s-1", "1", "k-old"), TTL_MS),
        outcome: "applied",
        entries: { _tag: "Stored", ids: [] },
        unfunded_usd: null,
        expires_at: null,
        limit: null,
        cap_reached: false,
        max_reservable_usd: null
      }
      const result = run({ budget: "100", enforced: true, firstOutcomes: [["k-old", stored]] }, [
        spend("s-1", "1", "k-old")
      ])
      expect(result.decisions).toMatchObject([{
        _tag: "Refused",
        reason: expect.stringMatching(/^idempotency_key_reused/)
      }])
    })

    it("a key decided in an earlier batch is a duplicate with the stored outcome, whatever the wallet looks like now", () => {
      const job = reserve("s-1", "1", "k-old")
      const stored: FirstOutcome = {
        job: fingerprintOf(reserve("s-1", "1.000000", "k-old"), TTL_MS),
        outcome: "insufficient_funds",
        entries: { _tag: "Stored", ids: [] },
        unfunded_usd: null,
        expires_at: null,
        limit: null,
        cap_reached: false,
        max_reservable_usd: null
      }
      const result = run({ budget: "100", enforced: true, firstOutcomes: [["k-old", stored]] }, [job])
      expect(result.decisions).toEqual([{ _tag: "Duplicate", job, first: stored }])
      expect(result.movements).toEqual([])
      expect(result.sessions.size).toBe(0)
    })

    it("a deferred job does not claim its key: a later job with the same key in the batch is decided", () => {
      const early = spend("s-1", "1", "k-early")
      const result = run({ budget: "10", enforced: true }, [early, reserve("s-1", "2"), spend("s-1", "1", "k-early")])
      expect(result.decisions.map((d) => d._tag)).toEqual(["Retry", "Decided", "Decided"])
      expect(result.movements.filter((m) => m.kind === "spend")).toHaveLength(1)
    })
  })

  describe("a refused or deferred job in a batch", () => {
    const others = (): ReadonlyArray<SettlementJob> => [
      reserve("s-1", "3", "o-1"),
      reserve("s-2", "4", "o-2"),
      spend("s-1", "1", "o-3"),
      spend("s-2", "5", "o-4"),
      release("s-1", "o-5"),
      release("s-2", "o-6"),
      reserve("s-3", "2", "o-7")
    ]
    const wallet = { budget: "10", enforced: true }
    const refusedAt = (jobs: ReadonlyArray<SettlementJob>, index: number, odd: SettlementJob) => [
      ...jobs.slice(0, index),
      odd,
      ...jobs.slice(index)
    ]

    it("is decided as it would be alone", () => {
      const refused = reserve("s-9", "10.000001", "odd-refused")
      const deferred = spend("s-unknown", "1", "odd-deferred")
      const batch = run(wallet, refusedAt(refusedAt(others(), 3, refused), 5, deferred))
      const alone = (job: SettlementJob) => views(run(wallet, [job]))[0]
      expect(views(batch).find((v) => v.key === "odd-refused")).toEqual(alone(refused))
      expect(views(batch).find((v) => v.key === "odd-deferred")).toEqual(alone(deferred))
    })

    it("never changes the decisions, movements or balances of the others, wherever it sits", () => {
      const baseline = run(wallet, others())
      const odd = [
        reserve("s-9", "10.000001", "odd-refused"),
        reserve("s-1", "999999999999", "odd-refused-known-session"),
        spend("s-unknown", "1", "odd-deferred-spend"),
        release("s-unknown", "odd-deferred-release")
      ]
      for (const job of odd) {
        for (let index = 0; index <= others().length; index++) {
          const mixed = run(wallet, refusedAt(others(), index, job))
          expect(views(mixed).filter((v) => !v.key.startsWith("odd-"))).toEqual(views(baseline))
          expect(mixed.movements).toEqual(baseline.movements)
          expect(formatted(mixed.balances)).toEqual(formatted(baseline.balances))
          // A refused first reserve makes its own session known (D12), holding nothing; no other session changes.
          expect(withoutSession(mixed.sessions, "s-9")).toEqual(baseline.sessions)
        }
      }
    })

    it("on a wallet that is not enforced, independent sessions are decided in a batch as each alone", () => {
      const jobs = [reserve("a", "1", "a-1"), release("ghost", "g-1"), reserve("b", "2", "b-1"), spend("c", "1", "c-1")]
      const sessions = [session("c", "0.5")]
      const batch = views(run({ reserved: "0.5", sessions }, jobs))
      expect(batch).toEqual(jobs.map((job) => views(run({ reserved: "0.5", sessions }, [job]))[0]))
    })
  })

  describe("session edges (D12, as amended)", () => {
    const extendJob = (session_id: string, idempotency_key = nextKey(), ttl_seconds?: number): SettlementJob => ({
      kind: "extend",
      payload: {
        account_id: ACCOUNT,
        session_id,
        idempotency_key,
        ...(ttl_seconds === undefined ? {} : { ttl_seconds })
      }
    })
    const outcomes = (result: Plan) =>
      result.decisions.map((d) =>
        d._tag === "Decided"
          ? d.first.outcome
          : d._tag === "Refused"
          ? d.code
          : d._tag === "Retry"
          ? "retry"
          : "duplicate"
      )

    it("a refused first reserve makes its session known: release answers nothing_to_release and closes it", () => {
      const result = run({ budget: "1", enforced: true }, [reserve("s-1", "5"), release("s-1")])
      expect(outcomes(result)).toEqual(["insufficient_funds", "nothing_to_release"])
      expect(result.movements).toEqual([])
      expect(result.sessions.get("s-1")).toMatchObject({ state: "released", held: Money.zero, spent: Money.zero })
    })

    it("after a refused first reserve, extend applies moving nothing; once released, it is session_closed", () => {
      const result = run({ budget: "1", enforced: true }, [
        reserve("s-1", "5"),
        extendJob("s-1", "beat", 600),
        release("s-1"),
        extendJob("s-1")
      ])
      expect(outcomes(result)).toEqual(["insufficient_funds", "applied", "nothing_to_release", "session_closed"])
      expect(result.movements).toEqual([])
      expect(result.decisions[1]).toMatchObject({ first: { expires_at: new Date(NOW.getTime() + 600_000) } })
    })

    it("a refused reserve of a session that already holds leaves it as it was", () => {
      const held = { ...session("s-1", "2"), expires_at: new Date(NOW.getTime() + 5_000) }
      const result = run({ budget: "2", reserved: "2", enforced: true, sessions: [held] }, [reserve("s-1", "1")])
      expect(outcomes(result)).toEqual(["insufficient_funds"])
      expect(result.sessions.size).toBe(0)
    })

    it("a reserve on a released or expired session answers session_closed and holds nothing", () => {
      for (const state of ["released", "expired"] as const) {
        const closed = session("s-1", "0", { state, spent: "3" })
        const result = run({ budget: "100", spent: "3", enforced: true, sessions: [closed] }, [reserve("s-1", "1")])
        expect(outcomes(result)).toEqual(["session_closed"])
        expect(result.movements).toEqual([])
        expect(result.sessions.size).toBe(0)
      }
    })

    it("a reserve after a release in the same batch answers session_closed; a spend after it is booked", () => {
      const result = run({ budget: "100", enforced: true }, [
        reserve("s-1", "2"),
        release("s-1"),
        reserve("s-1", "2"),
        spend("s-1", "1")
      ])
      expect(outcomes(result)).toEqual(["applied", "applied", "session_closed", "applied"])
      expect(result.movements.map((m) => m.kind)).toEqual(["reserve", "reserve_release", "spend"])
      expect(formatted(result.balances)).toMatchObject({ reserved: "0.000000", spent: "1.000000" })
      expect(result.sessions.get("s-1")).toMatchObject({ state: "released", unfunded: usd("1") })
    })

    it("an extend's key covers its hold time: another ttl_seconds is idempotency_key_reused, the default equals its value", () => {
      const open = { ...session("s-1", "1"), expires_at: new Date(NOW.getTime() + 5_000) }
      const result = run({ budget: "10", reserved: "1", sessions: [open] }, [
        extendJob("s-1", "beat", 600),
        extendJob("s-1", "beat", 600),
        extendJob("s-1", "beat", 900),
        extendJob("s-1", "default"),
        extendJob("s-1", "default", TTL_MS / 1000)
      ])
      expect(outcomes(result)).toEqual(["applied", "duplicate", "idempotency_key_reused", "applied", "duplicate"])
      expect(result.decisions[2]).toMatchObject({
        reason: expect.stringMatching(
          /^idempotency_key_reused: the key beat was first used for a extend .* 600 seconds/
        )
      })
    })
  })

  describe("refusal codes (precedence as TigerBeetle's result codes)", () => {
    it("a reused key is refused before its movement is looked at: the code is idempotency_key_reused, not amount_overflow", () => {
      const result = run({ budget: "0", reserved: "999999999990", sessions: [session("s-0", "999999999990")] }, [
        reserve("s-1", "1", "k-first"),
        reserve("s-1", "999999999999", "k-first")
      ])
      expect(result.decisions[1]).toMatchObject({ _tag: "Refused", code: "idempotency_key_reused" })
    })

    it("a movement a column could not hold is amount_overflow, its reason beginning with the code", () => {
      const result = run({ budget: "0", reserved: "999999999990", sessions: [session("s-0", "999999999990")] }, [
        reserve("s-1", "999999999999")
      ])
      expect(result.decisions[0]).toMatchObject({
        _tag: "Refused",
        code: "amount_overflow",
        reason: expect.stringMatching(/^amount_overflow: reserve would take reserved above/)
      })
    })

    it("the codes are listed in order of precedence, each once", () => {
      expect(REFUSAL_CODES).toEqual([
        "unknown_job_kind",
        "invalid_payload",
        "account_not_found",
        "repository_not_found",
        "user_not_found",
        "idempotency_key_reused",
        "session_attribution_mismatch",
        "amount_overflow"
      ])
      for (const code of REFUSAL_CODES) expect(refusalCodeOf(refusalMessage(code, "why"))).toBe(code)
      expect(refusalCodeOf("session s-1 is not known yet")).toBeUndefined()
    })
  })

  describe("a job whose movement a column could not hold (D8)", () => {
    it("a reserve that would take reserved past 12 integer digits is refused alone; its neighbours apply", () => {
      const wallet = {
        budget: "0",
        reserved: "999999999990",
        enforced: false,
        sessions: [session("s-0", "999999999990")]
      }
      const result = run(wallet, [
        reserve("s-1", "1", "k-before"),
        reserve("s-2", "999999999999", "k-huge"),
        reserve("s-3", "0.5", "k-after")
      ])
      expect(views(result).map((view) => [view.tag, view.key])).toEqual([
        ["Decided", "k-before"],
        ["Refused", "k-huge"],
        ["Decided", "k-after"]
      ])
      expect(decisionAt(result, 1)).toMatchObject({ reason: expect.stringContaining("reserved above") })
      expect(formatted(result.balances).reserved).toBe("999999999991.500000")
      expect(result.movements).toHaveLength(2)
      expect(result.sessions.has("s-2")).toBe(false)
    })

    it("a spend that would take available below what a column holds is refused alone", () => {
      const wallet = {
        budget: "0",
        reserved: "999999999000",
        enforced: false,
        sessions: [session("s-0", "999999999000"), session("s-1", "0")]
      }
      const result = run(wallet, [spend("s-1", "999999999", "k-huge"), spend("s-1", "1", "k-small")])
      expect(views(result).map((view) => [view.tag, view.key])).toEqual([["Refused", "k-huge"], ["Decided", "k-small"]])
      expect(decisionAt(result, 0)).toMatchObject({ reason: expect.stringContaining("available below") })
      expect(formatted(result.balances).available).toBe("-999999999001.000000")
    })
  })

  describe("properties", () => {
    const SESSIONS = ["s-0", "s-1", "s-2", "s-3", "s-4"]
    const KEYS = Array.from({ length: 12 }, (_, i) => `key-${i}`)

    // Whole micro-dollars, turned into decimal strings with integer arithmetic only.
    const wire = (micros: number) => `${Math.floor(micros / 1_000_000)}.${String(micros % 1_000_000).padStart(6, "0")}`
    const amount = fc.integer({ min: 1, max: 20_000_000 }).map(wire)
    const sessionId = fc.constantFrom(...SESSIONS, "never-seen")
    const key = fc.constantFrom(...KEYS)

    const job: fc.Arbitrary<SettlementJob> = fc.oneof(
      fc.record({ session: sessionId, amount, key }).map((j) => reserve(j.session, j.amount, j.key)),
      fc.record({ session: sessionId, amount, key }).map((j) => spend(j.session, j.amount, j.key)),
      fc.record({ session: sessionId, key }).map((j) => release(j.session, j.key))
    )

    /** Sessions the database already knows, and wallet balances consistent with their holds. */
    const walletState = fc.record({
      budgetMicros: fc.integer({ min: 0, max: 60_000_000 }),
      spentMicros: fc.integer({ min: 0, max: 60_000_000 }),
      enforced: fc.boolean(),
      known: fc.subarray(SESSIONS.slice(0, 4)),
      heldMicros: fc.array(fc.integer({ min: 0, max: 8_000_000 }), { minLength: 4, maxLength: 4 }),
      stored: fc.subarray(KEYS.slice(0, 3))
    })

    const stateOf = (w: typeof walletState extends fc.Arbitrary<infer A> ? A : never): Wallet => {
      const sessions = w.known.map((id, i) => {
        const held = w.heldMicros[i] ?? 0
        return session(id, wire(held), { state: held === 0 ? "released" : "open" })
      })
      const reserved = sessions.reduce((sum, s) => sum.plus(s.held), Money.zero)
      const stored: FirstOutcome = {
        job: { kind: "release", session_id: "s-0", amount_usd: null, ttl_seconds: null },
        outcome: "applied",
        entries: { _tag: "Stored", ids: ["00000000-0000-7000-8000-000000000000"] },
        unfunded_usd: null,
        expires_at: null,
        limit: null,
        cap_reached: false,
        max_reservable_usd: null
      }
      return {
        budget: wire(w.budgetMicros),
        reserved: Money.format(reserved),
        spent: wire(w.spentMicros),
        enforced: w.enforced,
        sessions,
        firstOutcomes: w.stored.map((k) => [k, stored] as const)
      }
    }

    it("balances stay non-negative, holds account for every change of reserved, and no reserve overdraws an enforced wallet", () => {
      fc.assert(
        fc.property(walletState, fc.array(job, { maxLength: 40 }), (w, jobs) => {
          const state = stateOf(w)
          const before = new Map((state.sessions ?? []).map((s) => [s.session_id, s]))
          const result = run(state, jobs)
          const start: Balances = {
            budget: usd(state.budget ?? "0"),
            reserved: usd(state.reserved ?? "0"),
            spent: usd(state.spent ?? "0")
          }

          expect(result.balances.reserved.gte(Money.zero)).toBe(true)
          expect(result.balances.spent.gte(Money.zero)).toBe(true)
          expect(result.balances.budget.eq(start.budget)).toBe(true)

          // The movements replay to the planned balances; on an enforced wallet no reserve leaves available below zero.
          let balances = start
          for (const movement of result.movements) {
            const applied = applyMovement(balances, movement)
            if (Either.isLeft(applied)) throw new Error(applied.left)
            balances = applied.right.after
            if (state.enforced && movement.kind === "reserve") expect(available(balances).gte(Money.zero)).toBe(true)
          }
          expect(formatted(balances)).toEqual(formatted(result.balances))

          // The holds of all sessions changed by exactly what reserved changed.
          let heldChange = Money.zero
          for (const [id, after] of result.sessions) {
            expect(after.held.gte(Money.zero)).toBe(true)
            expect(after.state === "open" || after.held.isZero()).toBe(true)
            heldChange = heldChange.plus(after.held).minus(before.get(id)?.held ?? Money.zero)
          }
          expect(Money.format(heldChange)).toBe(Money.format(result.balances.reserved.minus(start.reserved)))

          // One decision per job, in order; each key decided at most once, later uses answer its first outcome.
          expect(result.decisions.map((d) => d.job)).toEqual(jobs)
          const firsts = new Map<string, FirstOutcome>(state.firstOutcomes ?? [])
          let booked = 0
          for (const decision of result.decisions) {
            const k = decision.job.payload.idempotency_key
            const earlier = firsts.get(k)
            if (earlier !== undefined) {
              // A repeat of the key's first job answers its outcome; any other job under it is refused.
              const repeat = earlier.job.kind === decision.job.kind &&
                earlier.job.session_id === decision.job.payload.session_id &&
                (earlier.job.amount_usd === null || ("amount_usd" in decision.job.payload &&
                  earlier.job.amount_usd.eq(decision.job.payload.amount_usd)))
              expect(decision).toMatchObject(
                repeat
                  ? { _tag: "Duplicate", first: earlier }
                  : { _tag: "Refused", reason: expect.stringMatching(/^idempotency_key_reused/) }
              )
              continue
            }
            if (decision._tag === "Retry") {
              expect(decision.job.kind).not.toBe("reserve")
              continue
            }
            // The generated amounts stay far inside the columns' bounds.
            if (decision._tag === "Refused") throw new Error(`refused: ${decision.reason}`)
            firsts.set(k, decision.first)
            if (decision.first.entries._tag === "Planned") booked += decision.first.entries.indexes.length
            if (decision.first.outcome === "insufficient_funds") expect(state.enforced).toBe(true)
          }
          expect(booked).toBe(result.movements.length)
        }),
        { numRuns: 500 }
      )
    })

    it("a refused or deferred job inserted anywhere leaves every other decision as it was", () => {
      const odd = fc.constantFrom(
        reserve("s-odd", "999999999999", "odd-key"),
        spend("absent", "1", "odd-key"),
        release("absent", "odd-key")
      )
      fc.assert(
        fc.property(walletState, fc.array(job, { maxLength: 25 }), odd, fc.nat(), (w, jobs, extra, at) => {
          const state = { ...stateOf(w), enforced: true }
          const index = at % (jobs.length + 1)
          const baseline = run(state, jobs)
          const mixed = run(state, [...jobs.slice(0, index), extra, ...jobs.slice(index)])
          expect(views(mixed).filter((v) => v.key !== "odd-key")).toEqual(views(baseline))
          expect(mixed.movements).toEqual(baseline.movements)
          expect(withoutSession(mixed.sessions, "s-odd")).toEqual(baseline.sessions)
        }),
        { numRuns: 300 }
      )
    })
  })
})
