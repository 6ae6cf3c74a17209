import { Either } from "effect"
import {
  type Earmark,
  type Ending,
  endingMovement,
  freeOf,
  type GrantBalance,
  makeGrantBook,
  warningDue
} from "../Domain/Grants.js"
import { sameLabels, storedLabels } from "../Domain/Labels.js"
import * as Money from "../Domain/Money.js"
import { applyMovement, available, type Balances, type GrantPart, type Movement } from "../Domain/Movement.js"
import {
  type JobFingerprint,
  type LimitHit,
  type Outcome,
  type OutcomeToStore,
  type RefusalCode,
  refusalMessage,
  type SessionState,
  type StoredOutcome
} from "../Domain/SettlementSession.js"
import type { UsedLimit } from "../Domain/SpendLimit.js"
import { encodedWallet, type Wallet } from "../Domain/Wallet.js"
import type { ReachedLimit, ReservePayload, SettlementJob, SettlementResult } from "./Jobs.js"
import { type LimitNotice, lowerCap, makeLimitBook } from "./Limits.js"

export type { JobFingerprint, SessionState } from "../Domain/SettlementSession.js"

/**
 * The settlement rules (D8) as a pure function over one wallet's state: given
 * the locked balances, the sessions and earlier outcomes a batch touches, and
 * the batch's jobs in arrival order, it decides each job and the movements to
 * book. Nothing here does I/O, so the rules are tested without a database and
 * a batch of any size is written in a handful of statements.
 */

/**
 * What makes a job the same job (D8). An extend's hold time counts (an omitted `ttl_seconds` is
 * the default it stands for): the same key with another hold time is another job.
 */
export const fingerprintOf = (job: SettlementJob, reservationTtlMs: number): JobFingerprint => ({
  kind: job.kind,
  session_id: job.payload.session_id,
  amount_usd: "amount_usd" in job.payload ? Money.decimal(job.payload.amount_usd) : null,
  ttl_seconds: job.kind === "extend" ? job.payload.ttl_seconds ?? Math.round(reservationTtlMs / 1000) : null
})

/**
 * Amounts compare as numbers: "5" is the same amount as "5.000000" (as for wallet mutations, D6).
 * A fact an older record lacks (null) does not tell the jobs apart.
 */
const sameJob = (a: JobFingerprint, b: JobFingerprint) =>
  a.kind === b.kind && a.session_id === b.session_id &&
  (a.amount_usd === null || b.amount_usd === null || a.amount_usd.eq(b.amount_usd)) &&
  (a.ttl_seconds === null || b.ttl_seconds === null || a.ttl_seconds === b.ttl_seconds)

export interface FirstOutcome {
  readonly job: JobFingerprint
  readonly outcome: Outcome
  /** Ledger entry ids, or positions in this batch's movements for an outcome decided in the same batch. */
  readonly entries: EntryRefs
  readonly unfunded_usd: Money.Decimal | null
  /** An applied extend's new expiry (D12), answered again to its duplicates. */
  readonly expires_at: Date | null
  /** A `limit_reached` reserve's limit (D16). */
  readonly limit: LimitHit | null
  /** A spend that took its session's spent to its cap or found it there (D16). */
  readonly cap_reached: boolean
  /** What a refused reserve could have taken (D19). */
  readonly max_reservable_usd: Money.Decimal | null
}

export type EntryRefs =
  | { readonly _tag: "Stored"; readonly ids: ReadonlyArray<string> }
  | { readonly _tag: "Planned"; readonly indexes: ReadonlyArray<number> }

export type Decision =
  /** A first outcome: recorded under the job's key, with its movements (none for a refusal). */
  | { readonly _tag: "Decided"; readonly job: SettlementJob; readonly first: FirstOutcome }
  /** The key was seen before: answered with its first outcome, nothing booked. */
  | { readonly _tag: "Duplicate"; readonly job: SettlementJob; readonly first: FirstOutcome }
  /** Cannot be decided yet (its session's reserve may be late): nothing booked, the job is retried. */
  | { readonly _tag: "Retry"; readonly job: SettlementJob; readonly reason: string }
  /**
   * Refused with a code (a reused key, or a movement that would break the books): nothing
   * booked or recorded, the job fails for good, alone (D8). `reason` begins with the code.
   */
  | { readonly _tag: "Refused"; readonly job: SettlementJob; readonly code: RefusalCode; readonly reason: string }

export interface PlanInput {
  readonly balances: Balances
  readonly enforced: boolean
  readonly sessions: ReadonlyMap<string, SessionState>
  readonly firstOutcomes: ReadonlyMap<string, FirstOutcome>
  readonly jobs: ReadonlyArray<SettlementJob>
  /** Sessions whose hold has lapsed (the expiry sweep): released with note `expired` before the jobs. */
  readonly expire?: ReadonlyArray<string>
  readonly now: Date
  readonly reservationTtlMs: number
  /**
   * The account's saved limits with their use as the batch found it (D16), read after the
   * wallet's lock; the plan adds what it books, so its jobs are judged in arrival order.
   */
  readonly limits?: ReadonlyArray<UsedLimit>
  /**
   * What the limits' current periods have announced (D17, D19): `limit id/percent`, 100 for
   * `limit.reached`, the others `limit.approaching`'s. Not announced again.
   */
  readonly announced?: ReadonlySet<string>
  /**
   * The wallet's grants that can still move (D21): live ones, and ended ones whose earmarks are
   * held. A due one is ended before anything else; holds earmark on them, spends draw them.
   */
  readonly grants?: ReadonlyArray<GrantBalance>
}

/**
 * What the batch's events are made of (D17), in the order they happened: each movement booked
 * (its balance crossings), a session closed, a session's cap reached, a limit reached. The
 * planner says what happened; the caller turns it into events with the balances and views it
 * wrote.
 */
export type Notice =
  | { readonly _tag: "Moved"; readonly index: number }
  | { readonly _tag: "SessionClosed"; readonly session_id: string }
  | { readonly _tag: "CapReached"; readonly session_id: string; readonly cap: Money.Decimal }
  /** A grant expired (D21): its `credit_expired` entry is the movement at `index`. */
  | { readonly _tag: "GrantExpired"; readonly grant_id: string; readonly index: number }
  /** A live grant's `grant.expiring` warning is due (D21). */
  | {
    readonly _tag: "GrantExpiring"
    readonly grant_id: string
    readonly days_left: 7 | 1
    readonly free: Money.Decimal
  }
  | LimitNotice

/** What a batch's spends add to the running totals of one attribution, model and labels (D16, D19). */
export interface SpendTotal {
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
  readonly labels: Readonly<Record<string, string>>
  readonly spent: Money.Decimal
  readonly unfunded: Money.Decimal
  /** Sessions whose first spend this is: a session counts once, on the day of its first spend. */
  readonly sessions: number
}

export interface Plan {
  readonly decisions: ReadonlyArray<Decision>
  readonly movements: ReadonlyArray<Movement>
  /** Sessions as they stand after the batch; only those the batch changed. */
  readonly sessions: ReadonlyMap<string, SessionState>
  readonly balances: Balances
  /** The batch's spends by attribution, for the running totals. */
  readonly spendTotals: ReadonlyArray<SpendTotal>
  readonly notices: ReadonlyArray<Notice>
  /** The grants the batch moved, as it leaves them (D21); all of them, for the events' views. */
  readonly grants: { readonly changed: ReadonlyArray<GrantBalance>; readonly all: ReadonlyArray<GrantBalance> }
}

const refused = (job: SettlementJob, code: RefusalCode, detail: string): Decision => ({
  _tag: "Refused",
  job,
  code,
  reason: refusalMessage(code, detail)
})

/** Earmarks as an entry names them. */
const partsOf = (earmarks: ReadonlyArray<Earmark>): Array<GrantPart> =>
  earmarks.map((earmark) => ({ grant_id: earmark.grant_id, amount: earmark.amount }))

/** A session's earmarks with more added: one per grant, in the order they were first made. */
const addEarmarks = (held: ReadonlyArray<Earmark>, added: ReadonlyArray<Earmark>): Array<Earmark> => {
  const byGrant = new Map(held.map((earmark) => [earmark.grant_id, earmark.amount]))
  for (const earmark of added) {
    byGrant.set(earmark.grant_id, (byGrant.get(earmark.grant_id) ?? Money.zero).plus(earmark.amount))
  }
  return [...byGrant].map(([grant_id, amount]) => ({ grant_id, amount }))
}

/** A repository or user id as PostgreSQL stores a uuid: lower case, so "ABC…" and "abc…" are one id. */
const idOf = (id: string | undefined): string | null => id === undefined ? null : id.toLowerCase()

const same = (a: string | Money.Decimal | null, b: string | Money.Decimal | null) =>
  a === null || b === null ? a === b : typeof a === "string" || typeof b === "string" ? a === b : a.eq(b)

/**
 * Why a reserve cannot join its session (D16): the first reserve set the session's repository,
 * user and cap; a later one may omit them (it inherits them) but not name others.
 */
const termsMismatch = (session: SessionState, payload: ReservePayload): string | undefined => {
  const named = [
    ["repository_id", session.repository_id, idOf(payload.repository_id)],
    ["user_id", session.user_id, idOf(payload.user_id)],
    ["max_usd", session.max_usd, payload.max_usd === undefined ? null : Money.decimal(payload.max_usd)]
  ] as const
  const differ = named.filter(([, was, now]) => now !== null && !same(was, now))
  const shown = (value: string | Money.Decimal | null) =>
    value === null ? "none" : typeof value === "string" ? value : Money.format(value)
  const described = differ.map(([name, was, now]) => `${name} ${shown(was)}, not ${shown(now)}`)
  // Labels as attribution (D19): a later reserve may omit them, not name others.
  if (payload.labels !== undefined && !sameLabels(session.labels, payload.labels)) {
    described.push(`labels ${JSON.stringify(session.labels)}, not ${JSON.stringify(payload.labels)}`)
  }
  return described.length === 0 ? undefined : `session ${session.session_id} was opened with ${described.join(", ")}`
}

export const plan = (input: PlanInput): Plan => {
  const decided = (
    job: SettlementJob,
    outcome: Outcome,
    indexes: ReadonlyArray<number>,
    facts: {
      readonly unfunded?: Money.Decimal
      readonly expiresAt?: Date
      readonly limit?: LimitHit
      readonly capReached?: boolean
      readonly maxReservable?: Money.Decimal
    } = {}
  ): Decision => ({
    _tag: "Decided",
    job,
    first: {
      job: fingerprintOf(job, input.reservationTtlMs),
      outcome,
      entries: { _tag: "Planned", indexes },
      unfunded_usd: facts.unfunded ?? null,
      expires_at: facts.expiresAt ?? null,
      limit: facts.limit ?? null,
      cap_reached: facts.capReached ?? false,
      max_reservable_usd: facts.maxReservable ?? null
    }
  })
  let balances = input.balances
  const sessions = new Map(input.sessions)
  const changed = new Map<string, SessionState>()
  const firstOutcomes = new Map(input.firstOutcomes)
  const movements: Array<Movement> = []
  const decisions: Array<Decision> = []
  const notices: Array<Notice> = []
  const limits = makeLimitBook(
    input.limits ?? [],
    input.announced ?? new Set(),
    (notice) => notices.push(notice),
    input.now
  )
  const grants = makeGrantBook(input.grants ?? [])
  /** The largest reserve a refused one could have taken (D19): what the limits and, on an enforced wallet, the funds leave. */
  const maxReservable = (session: SessionState) => {
    const most = lowerCap(limits.headroom(session), input.enforced ? available(balances) : null) ?? Money.zero
    return most.gt(0) ? most : Money.zero
  }
  const spendTotals = new Map<string, SpendTotal>()
  const countSpend = (
    session: SessionState,
    model: string | null,
    amount: Money.Decimal,
    unfunded: Money.Decimal
  ) => {
    const key = JSON.stringify([session.repository_id, session.user_id, model, storedLabels(session.labels)])
    const total = spendTotals.get(key)
    spendTotals.set(key, {
      repository_id: session.repository_id,
      user_id: session.user_id,
      model,
      labels: session.labels,
      spent: (total?.spent ?? Money.zero).plus(amount),
      unfunded: (total?.unfunded ?? Money.zero).plus(unfunded),
      sessions: (total?.sessions ?? 0) + (session.spent.isZero() ? 1 : 0)
    })
  }

  /**
   * Books a movement, or says why it cannot be: the rules above keep balances
   * consistent, but not within the columns' bounds, which only huge amounts reach.
   */
  const book = (movement: Movement): Either.Either<number, string> =>
    Either.map(applyMovement(balances, movement), (applied) => {
      balances = applied.after
      movements.push(movement)
      notices.push({ _tag: "Moved", index: movements.length - 1 })
      return movements.length - 1
    })
  /** A session as the batch leaves it; one that opens or closes moves the concurrency limits' counts. */
  const update = (session: SessionState) => {
    limits.openChanged(sessions.get(session.session_id), session)
    sessions.set(session.session_id, session)
    changed.set(session.session_id, session)
  }
  /** Ends grant money (D21); lowering the budget by a grant's own unspent money never breaks the books. */
  const endGrants = (endings: ReadonlyArray<Ending>) =>
    endings.map((ending) => Either.getOrThrowWith(book(endingMovement(ending)), (why) => new Error(why)))

  /**
   * Returns a session's whole hold and closes it (D8), its earmarks to their grants (D21): what
   * comes back to an ended grant ends then, with its entry. Returning a hold only lowers
   * balances, so the books cannot refuse it.
   */
  const releaseHold = (session: SessionState, state: "released" | "expired", key: string | null): number => {
    const index = Either.getOrThrowWith(
      book({
        kind: "reserve_release",
        amount_usd: session.held,
        session_id: session.session_id,
        task_id: session.task_id,
        repository_id: session.repository_id,
        user_id: session.user_id,
        labels: session.labels,
        idempotency_key: key,
        grants: partsOf(session.earmarks),
        ...(state === "expired" ? { note: "expired" } : {})
      }),
      (why) => new Error(why)
    )
    endGrants(grants.giveBack(session.earmarks))
    limits.add(session, session.held.negated())
    update({ ...session, held: Money.zero, state, earmarks: [] })
    notices.push({ _tag: "SessionClosed", session_id: session.session_id })
    return index
  }

  /** A session that holds nothing yet, its hold's time counted from now, with the terms of its first reserve (D16). */
  const openSession = (session_id: string, task_id: string | null, payload: ReservePayload): SessionState => ({
    session_id,
    task_id,
    held: Money.zero,
    spent: Money.zero,
    unfunded: Money.zero,
    state: "open",
    expires_at: new Date(input.now.getTime() + input.reservationTtlMs),
    repository_id: idOf(payload.repository_id),
    user_id: idOf(payload.user_id),
    max_usd: payload.max_usd === undefined ? null : Money.decimal(payload.max_usd),
    labels: payload.labels ?? {},
    warned_percent: 0,
    earmarks: []
  })

  // A grant past its time ends before anything else draws on it (D21), and warns ahead of it.
  for (const ending of grants.expireDue(input.now)) {
    const [index] = endGrants([ending])
    if (index !== undefined) notices.push({ _tag: "GrantExpired", grant_id: ending.grant_id, index })
  }
  for (const grant of grants.all()) {
    const days = warningDue(grant, input.now)
    if (days !== 7 && days !== 1) continue
    grants.warned(grant.id, days)
    notices.push({ _tag: "GrantExpiring", grant_id: grant.id, days_left: days, free: freeOf(grant) })
  }

  // A hold past its time resolves once: an open session's hold is returned, and the session closes (D8).
  for (const session_id of input.expire ?? []) {
    const session = sessions.get(session_id)
    if (session === undefined || session.state !== "open") continue
    if (session.held.isZero()) {
      update({ ...session, state: "expired" })
      notices.push({ _tag: "SessionClosed", session_id })
    } else releaseHold(session, "expired", null)
  }

  for (const job of input.jobs) {
    const { idempotency_key: key, session_id } = job.payload
    const earlier = firstOutcomes.get(key)
    if (earlier !== undefined) {
      decisions.push(
        sameJob(earlier.job, fingerprintOf(job, input.reservationTtlMs))
          ? { _tag: "Duplicate", job, first: earlier }
          : refused(
            job,
            "idempotency_key_reused",
            `the key ${key} was first used for a ${earlier.job.kind} of session ${earlier.job.session_id}${
              earlier.job.amount_usd === null ? "" : ` of ${Money.format(earlier.job.amount_usd)}`
            }${earlier.job.ttl_seconds === null ? "" : ` for ${earlier.job.ttl_seconds} seconds`}`
          )
      )
      continue
    }
    const session = sessions.get(session_id)
    let decision: Decision
    switch (job.kind) {
      case "reserve": {
        // A closed session stays closed (D12): the runner starts a new session id.
        if (session !== undefined && session.state !== "open") {
          decision = decided(job, "session_closed", [])
          break
        }
        const amount = Money.decimal(job.payload.amount_usd)
        const task_id = job.payload.task_id ?? session?.task_id ?? null
        const mismatch = session === undefined ? undefined : termsMismatch(session, job.payload)
        if (mismatch !== undefined) {
          decision = refused(job, "session_attribution_mismatch", mismatch)
          break
        }
        const current = session ?? openSession(session_id, task_id, job.payload)
        // Limits before funds (D16): a limit holds on enforced and unenforced wallets alike.
        const passed = limits.passed(current, amount)
        if (passed !== undefined) {
          // Known from now on, as after insufficient_funds (D16, D12).
          if (session === undefined) update(current)
          if (passed.kind === "spend") limits.refusedBy(passed)
          decision = decided(job, "limit_reached", [], { limit: passed, maxReservable: maxReservable(current) })
          break
        }
        if (input.enforced && available(balances).lt(amount)) {
          // A session the service has answered for is known (D12): a release or an extend that follows
          // a refused first reserve is answered at once, not retried as if its reserve were late.
          if (session === undefined) update(current)
          decision = decided(job, "insufficient_funds", [], { maxReservable: maxReservable(current) })
          break
        }
        const reserve: Movement = {
          kind: "reserve",
          amount_usd: amount,
          session_id,
          task_id,
          repository_id: current.repository_id,
          user_id: current.user_id,
          labels: current.labels,
          idempotency_key: key
        }
        const fits = applyMovement(balances, reserve)
        if (Either.isLeft(fits)) {
          decision = refused(job, "amount_overflow", fits.left)
          break
        }
        // Earmarked on the grants in draw-down order, the rest on the base (D21).
        const earmarks = grants.earmark(amount, input.now)
        const index = Either.getOrThrowWith(
          book({ ...reserve, grants: partsOf(earmarks) }),
          (why) => new Error(why)
        )
        limits.add(current, amount)
        // A reservation is counted from the latest reserve: a session that keeps reserving keeps its hold.
        update(limits.warnSession({
          ...current,
          task_id,
          held: current.held.plus(amount),
          state: "open",
          expires_at: new Date(input.now.getTime() + input.reservationTtlMs),
          earmarks: addEarmarks(current.earmarks, earmarks)
        }))
        decision = decided(job, "applied", [index])
        break
      }
      case "spend": {
        if (session === undefined) {
          decision = { _tag: "Retry", job, reason: `session ${session_id} is not known yet` }
          break
        }
        const amount = Money.decimal(job.payload.amount_usd)
        const fromHold = amount.lt(session.held) ? amount : session.held
        const spend: Movement = {
          kind: "spend",
          amount_usd: amount,
          from_reserved_usd: fromHold,
          session_id,
          task_id: session.task_id,
          repository_id: session.repository_id,
          user_id: session.user_id,
          labels: session.labels,
          model: job.payload.model ?? null,
          idempotency_key: key
        }
        const fits = applyMovement(balances, spend)
        if (Either.isLeft(fits)) {
          decision = refused(job, "amount_overflow", fits.left)
          break
        }
        // Its earmarks first, then the grants' free amounts in draw-down order, then the base (D21).
        const drawn = grants.draw(session.earmarks, amount, input.now)
        const index = Either.getOrThrowWith(
          book({
            ...spend,
            grants: drawn.draws.map((draw) => ({
              grant_id: draw.grant_id,
              amount: draw.amount,
              from_reserved: draw.from_reserved
            }))
          }),
          (why) => new Error(why)
        )
        const unfunded = amount.minus(fromHold)
        // Only what a spend takes beyond its hold adds to a limit's use: the hold was counted already.
        limits.add(session, unfunded)
        countSpend(session, job.payload.model ?? null, amount, unfunded)
        const spent = session.spent.plus(amount)
        update(limits.warnSession({
          ...session,
          held: session.held.minus(fromHold),
          spent,
          unfunded: session.unfunded.plus(unfunded),
          earmarks: drawn.earmarks
        }))
        const cap = limits.capOf(session)
        const capReached = cap !== null && spent.gte(cap)
        // Once per session (D17): the spend that takes spent from under the cap to it.
        if (capReached && session.spent.lt(cap)) notices.push({ _tag: "CapReached", session_id, cap })
        decision = decided(job, "applied", [index], { unfunded, capReached })
        break
      }
      case "release": {
        if (session === undefined) {
          decision = { _tag: "Retry", job, reason: `session ${session_id} is not known yet` }
          break
        }
        if (session.held.isZero()) {
          // Nothing is returned, but the session is over all the same: the view says closed (D12).
          if (session.state === "open") {
            update({ ...session, state: "released" })
            notices.push({ _tag: "SessionClosed", session_id })
          }
          decision = decided(job, "nothing_to_release", [])
          break
        }
        decision = decided(job, "applied", [releaseHold(session, "released", key)])
        break
      }
      case "extend": {
        if (session === undefined) {
          decision = { _tag: "Retry", job, reason: `session ${session_id} is not known yet` }
          break
        }
        if (session.state !== "open") {
          decision = decided(job, "session_closed", [])
          break
        }
        // A heartbeat moves the hold's expiry and nothing else: no ledger entry, money does not move (D12).
        const ttlMs = job.payload.ttl_seconds === undefined ? input.reservationTtlMs : job.payload.ttl_seconds * 1000
        const expiresAt = new Date(input.now.getTime() + ttlMs)
        update({ ...session, expires_at: expiresAt })
        decision = decided(job, "applied", [], { expiresAt })
        break
      }
    }
    if (decision._tag === "Decided") firstOutcomes.set(key, decision.first)
    decisions.push(decision)
  }
  return {
    decisions,
    movements,
    sessions: changed,
    balances,
    spendTotals: [...spendTotals.values()],
    notices,
    grants: { changed: grants.changed(), all: grants.all() }
  }
}

/** A limit as the job's result carries it: amounts in the wire format of D6. */
export const encodedLimit = (limit: LimitHit): ReachedLimit =>
  limit.kind === "spend"
    ? {
      id: limit.id,
      scope: limit.scope,
      scope_id: limit.scope_id,
      ...(limit.applies_to === null ? {} : { applies_to: limit.applies_to }),
      period: limit.period,
      ...(limit.window_minutes === null
        ? {}
        : { window_minutes: limit.window_minutes, retry_after_seconds: limit.retry_after_seconds }),
      amount_usd: Money.format(limit.amount_usd),
      used_usd: Money.format(limit.used_usd)
    }
    : {
      id: limit.id,
      scope: limit.scope,
      scope_id: limit.scope_id,
      ...(limit.applies_to === null ? {} : { applies_to: limit.applies_to }),
      period: limit.period,
      amount_usd: null,
      used_usd: null,
      max_open_sessions: limit.max_open_sessions,
      open_sessions: limit.open_sessions
    }

/** A key's first outcome as its record keeps it. */
export const firstOutcomeOf = (record: StoredOutcome): FirstOutcome => ({
  job: record.job,
  outcome: record.outcome,
  entries: { _tag: "Stored", ids: record.entry_ids },
  unfunded_usd: record.unfunded_usd,
  expires_at: record.expires_at,
  limit: record.limit,
  cap_reached: record.cap_reached,
  max_reservable_usd: record.max_reservable_usd
})

/** The ledger entries of a first outcome: stored ones, or those this batch wrote for it (ids in the order of the plan's movements). */
export const entryIdsOf = (first: FirstOutcome, written: ReadonlyArray<string>): ReadonlyArray<string> =>
  first.entries._tag === "Stored" ? first.entries.ids : first.entries.indexes.flatMap((index) => written[index] ?? [])

/** The outcome of each key the plan decided for the first time, for the batch's one write. */
export const recordsOf = (
  decisions: ReadonlyArray<Decision>,
  written: ReadonlyArray<string>
): Array<OutcomeToStore> =>
  decisions.flatMap((decision): Array<OutcomeToStore> =>
    decision._tag === "Decided"
      ? [{
        idempotency_key: decision.job.payload.idempotency_key,
        job: decision.first.job,
        outcome: decision.first.outcome,
        entry_ids: [...entryIdsOf(decision.first, written)],
        unfunded_usd: decision.first.unfunded_usd,
        expires_at: decision.first.expires_at,
        limit: decision.first.limit,
        cap_reached: decision.first.cap_reached,
        max_reservable_usd: decision.first.max_reservable_usd
      }]
      : []
  )

/**
 * A decided or duplicate job's D8 result: its status, its entries, and the wallet right after
 * its own movement (`walletsAfter`, one per movement of the plan), or after the batch for a
 * refusal or a duplicate.
 */
export const resultOf = (
  decision: Extract<Decision, { readonly _tag: "Decided" | "Duplicate" }>,
  written: ReadonlyArray<string>,
  walletsAfter: ReadonlyArray<Wallet>,
  after: Wallet
): SettlementResult => {
  const own = decision._tag === "Decided" && decision.first.entries._tag === "Planned"
    ? decision.first.entries.indexes.at(-1)
    : undefined
  const wallet = own === undefined ? after : walletsAfter[own] ?? after
  return {
    status: decision._tag === "Duplicate" ? "duplicate" : decision.first.outcome,
    ...(decision._tag === "Duplicate" ? { first_status: decision.first.outcome } : {}),
    entry_ids: [...entryIdsOf(decision.first, written)],
    wallet: encodedWallet(wallet),
    ...(decision.job.kind === "spend" && decision.first.unfunded_usd !== null
      ? { unfunded_usd: Money.format(decision.first.unfunded_usd) }
      : {}),
    ...(decision.first.expires_at === null ? {} : { expires_at: decision.first.expires_at.toISOString() }),
    ...(decision.first.limit === null ? {} : { limit: encodedLimit(decision.first.limit) }),
    ...(decision.first.limit?.kind === "spend" && decision.first.limit.period === "rolling"
      ? { retry_after_seconds: decision.first.limit.retry_after_seconds }
      : {}),
    ...(decision.first.cap_reached ? { cap_reached: true as const } : {}),
    ...(decision.first.max_reservable_usd === null
      ? {}
      : { max_reservable_usd: Money.format(decision.first.max_reservable_usd) })
  }
}
