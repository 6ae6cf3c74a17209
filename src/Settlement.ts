import { Cause, Data, DateTime, Duration, Effect, Either, Exit, FiberRef } from "effect"
import { AppConfig } from "./Config.js"
import type { Account } from "./Domain/Account.js"
import type { Threshold } from "./Domain/Events.js"
import { storedLabels } from "./Domain/Labels.js"
import * as Money from "./Domain/Money.js"
import { refusalMessage } from "./Domain/SettlementSession.js"
import type { Wallet } from "./Domain/Wallet.js"
import { Events } from "./Events.js"
import { type Keyed, makeBatcher } from "./Settlement/Batcher.js"
import type { ReservePayload, SettlementJob, SettlementResult } from "./Settlement/Jobs.js"
import { REACHED_PERCENT } from "./Settlement/Limits.js"
import { SettlementMetrics } from "./Settlement/Metrics.js"
import { eventsOfPlan } from "./Settlement/Notices.js"
import {
  type Decision,
  encodedLimit,
  type FirstOutcome,
  firstOutcomeOf,
  type Plan,
  plan,
  recordsOf,
  resultOf,
  type SessionState
} from "./Settlement/Plan.js"
import { SettlementRepo } from "./Settlement/Repo.js"
import { sessionOf } from "./Settlement/Sessions.js"
import { sessionRowOf } from "./Settlement/SessionsRepo.js"
import {
  announcedOf,
  grantRowOf,
  limitsOf,
  membersOf,
  nowOf,
  sessionStateOf,
  storedOutcomeOf,
  thresholdsOf,
  timeOf,
  walletRowOf
} from "./Settlement/State.js"
import { producerLinks } from "./Settlement/Tracing.js"
import { type BatchState, type BatchWrite, SettlementTransition } from "./Settlement/Transition.js"
import { isDatabaseAway, isSqlError } from "./Sql/Errors.js"
import { balanceOf, grantView, grantWrite, storedGrantParts } from "./Wallets/GrantRows.js"
import { appendTo, walletOf } from "./Wallets/Ledger.js"

/** A job that can never apply (unknown account, a reused key…): failing it for good is right; its message begins with its refusal code. */
export class SettlementRejected extends Data.TaggedError("SettlementRejected")<{ readonly message: string }> {}

/** A job that cannot apply yet (its session's reserve may be late): BullMQ retries it with backoff. */
export class SettlementDeferred extends Data.TaggedError("SettlementDeferred")<{ readonly message: string }> {}

export type SettlementFailure = SettlementRejected | SettlementDeferred

type JobExit = Exit.Exit<SettlementResult, SettlementFailure>

/** Jobs per transaction at most: bounds a transaction's time and its locks'. */
const MAX_BATCH = 200
/**
 * Batches at once, per worker. One: a batch costs the worker about as much CPU as seven jobs do,
 * and what arrives while it runs goes whole into the next. A second one at a time kept the
 * database busier but split the waiting jobs into two smaller batches: measured at the bench's
 * load, 23% more CPU per job and 19% fewer jobs a second. More throughput comes from more
 * workers (D14).
 */
export const MAX_RUNNING_BATCHES = 1
const EXPIRY_SWEEP_WALLETS = 100
/**
 * How often a batch reads again the wallets another writer changed between its read and its
 * write, before its jobs of those wallets are left to BullMQ's retries.
 */
const MAX_ATTEMPTS = 8

/** What a batch's writes moved: the holds the expiry sweep released. */
interface Tally {
  moved: number
}

/** One wallet's part of a batch: its account's id, its jobs in arrival order, and their places in the batch. */
interface WalletJobs {
  readonly accountId: string
  readonly jobs: ReadonlyArray<SettlementJob>
  readonly places: ReadonlyArray<number>
  /** The expiry sweep's: release the account's holds past their time, before any job. */
  readonly expire: boolean
}

/** Two smaller batches of the same jobs: by wallets, or one wallet's jobs in two runs; none for a single job. */
const splitInHalves = (groups: ReadonlyArray<WalletJobs>): [Array<WalletJobs>, Array<WalletJobs>] | undefined => {
  if (groups.length > 1) {
    const middle = Math.ceil(groups.length / 2)
    return [groups.slice(0, middle), groups.slice(middle)]
  }
  const [only] = groups
  if (only === undefined || only.jobs.length < 2) return undefined
  const middle = Math.ceil(only.jobs.length / 2)
  return [
    [{ ...only, jobs: only.jobs.slice(0, middle), places: only.places.slice(0, middle) }],
    [{ ...only, jobs: only.jobs.slice(middle), places: only.places.slice(middle) }]
  ]
}

/**
 * Why a reserve's attribution is not of its account (D16), as its refusal: a repository of
 * another account (or none) is `repository_not_found`, checked before the user's `user_not_found`.
 */
const foreignAttribution = (
  payload: ReservePayload,
  account: Account,
  owner: (owned: "repository" | "user", id: string) => string | undefined
): string | undefined => {
  if (payload.repository_id !== undefined && owner("repository", payload.repository_id) !== account.id) {
    return refusalMessage("repository_not_found", `no repository ${payload.repository_id} of account ${account.id}`)
  }
  if (payload.user_id !== undefined && owner("user", payload.user_id) !== account.id) {
    return refusalMessage("user_not_found", `no user ${payload.user_id} of account ${account.id}`)
  }
  return undefined
}

/**
 * The periods' announcements of a plan's `limit.reached` and `limit.approaching` events (D17,
 * D19): written beside them, so never announced twice a period. A session limit's warnings are
 * kept with their session instead (its `warned_percent`).
 */
const announcementsOf = (walletId: string, plan: Plan) =>
  plan.notices.flatMap((notice) => {
    if (notice._tag !== "LimitReached" && notice._tag !== "LimitApproaching") return []
    if (notice.limit.id === null || notice.period_start === null) return []
    const percent = notice._tag === "LimitReached" ? REACHED_PERCENT : notice.percent
    return [{
      wallet_id: walletId,
      limit_id: notice.limit.id,
      scope_key: notice.limit.applies_to ?? "",
      period_start: notice.period_start.toISOString(),
      percent
    }]
  })

const amount = (value: Money.Decimal | null) => value === null ? null : Money.format(value)

/** A batch's write as its wallets are decided, one after the other. */
type WriteBuilder = {
  [K in keyof BatchWrite]: BatchWrite[K] extends ReadonlyArray<infer Row> ? Array<Row> : BatchWrite[K]
}

/** A wallet's state as the read found it, indexed for its plan. */
interface AccountState {
  readonly sessions: Map<string, SessionState>
  readonly createdAt: Map<string, Date>
  readonly firstOutcomes: Map<string, FirstOutcome>
  readonly expired: Array<string>
}

const byAccount = (state: BatchState): Map<string, AccountState> => {
  const found = new Map<string, AccountState>()
  const of = (accountId: string) => {
    let entry = found.get(accountId)
    if (entry === undefined) {
      entry = { sessions: new Map(), createdAt: new Map(), firstOutcomes: new Map(), expired: [] }
      found.set(accountId, entry)
    }
    return entry
  }
  for (const row of state.sessions) {
    const entry = of(row.account_id)
    entry.sessions.set(row.session_id, sessionStateOf(row))
    entry.createdAt.set(row.session_id, new Date(row.created_at))
    if (row.expired) entry.expired.push(row.session_id)
  }
  for (const row of state.records) {
    of(row.account_id).firstOutcomes.set(row.idempotency_key, firstOutcomeOf(storedOutcomeOf(row)))
  }
  return found
}

/** How much of the spends past keeping one run of the prune removes: 20 statements of 5,000 rows. */
const PRUNE_CHUNK_ROWS = 5_000
const PRUNE_CHUNKS = 20

/**
 * Settles session money (D8): reserve before a run, spend while it runs, release the rest, each
 * job exactly once by its idempotency key. Jobs that arrive together, of one wallet or of many,
 * are settled by one transition (Settlement/Transition.ts): one read of everything the rules need,
 * the rules decided here (Plan.ts), one write of everything they decided, each job with its own
 * ledger entry, record and result; a job that is refused or deferred never spoils the others.
 */
export class Settlement extends Effect.Service<Settlement>()("Settlement", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const transition = yield* SettlementTransition
    const repo = yield* SettlementRepo
    const metrics = yield* SettlementMetrics
    const events = yield* Events
    const reservationTtlMs = Duration.toMillis(config.reservationTtl)

    /**
     * One wallet decided: its plan, the movements appended to its ledger, its events, and the rows
     * the transition writes for it; `results` answers its jobs once the write has taken it.
     */
    const decide = (input: {
      readonly account: Account
      readonly group: WalletJobs
      readonly state: BatchState
      readonly found: AccountState | undefined
      readonly thresholds: ReadonlyArray<Threshold>
      readonly now: Date
      readonly write: WriteBuilder
    }) => {
      const { account, found, group, now, state, write } = input
      const stateAccount = state.accounts.find((a) => a.id === account.id)
      if (stateAccount === undefined || stateAccount.wallet === null) return undefined
      const stateWallet = stateAccount.wallet
      const before = walletRowOf(account, stateWallet)
      const time = timeOf(state)
      const limits = state.limits.filter((limit) => limit.account_id === account.id)
      const grantRows = state.grants.filter((grant) => grant.account_id === account.id)
      const planned = plan({
        balances: { budget: before.budget_usd, reserved: before.reserved_usd, spent: before.spent_usd },
        enforced: before.enforced,
        sessions: found?.sessions ?? new Map(),
        firstOutcomes: found?.firstOutcomes ?? new Map(),
        jobs: group.jobs,
        ...(group.expire ? { expire: found?.expired ?? [] } : {}),
        now,
        reservationTtlMs,
        limits: limitsOf(limits, now),
        announced: announcedOf(limits),
        grants: grantRows.map((grant) => balanceOf(grantRowOf(grant, stateWallet.id)))
      })
      const appended = appendTo(before, planned.movements, time)
      // The planner books only movements the books accept: one they refuse is a defect, which splits the batch.
      if (Either.isLeft(appended)) throw new Error(`refused to write an inconsistent ledger entry: ${appended.left}`)
      const moved = appended.right?.moved ?? []
      const entryIds = moved.map(({ entry }) => entry.id)
      const walletsAfter = moved.map(({ wallet }) => wallet)
      const after = walletOf(appended.right?.after ?? before)
      const walletId = before.id
      const update = appended.right?.update
      write.wallets.push({
        id: walletId,
        xmin: stateWallet.xmin,
        budget_usd: Money.format(update?.budget_usd ?? before.budget_usd),
        reserved_usd: Money.format(update?.reserved_usd ?? before.reserved_usd),
        spent_usd: Money.format(update?.spent_usd ?? before.spent_usd),
        enforced: update?.enforced ?? before.enforced,
        version: update?.version ?? before.version,
        last_sequence: update?.last_sequence ?? before.last_sequence,
        moved: update !== undefined
      })
      for (const entry of appended.right?.entries ?? []) {
        write.entries.push({
          ...entry,
          grants: storedGrantParts(entry.grants),
          labels: storedLabels(entry.labels),
          amount_usd: Money.format(entry.amount_usd),
          budget_after_usd: Money.format(entry.budget_after_usd),
          reserved_after_usd: Money.format(entry.reserved_after_usd),
          spent_after_usd: Money.format(entry.spent_after_usd),
          available_after_usd: Money.format(entry.available_after_usd)
        })
      }
      for (const session of planned.sessions.values()) {
        write.sessions.push({
          wallet_id: walletId,
          session_id: session.session_id,
          task_id: session.task_id,
          held_usd: Money.format(session.held),
          spent_usd: Money.format(session.spent),
          unfunded_usd: Money.format(session.unfunded),
          state: session.state,
          expires_at: session.expires_at.toISOString(),
          repository_id: session.repository_id,
          user_id: session.user_id,
          max_usd: amount(session.max_usd),
          labels: storedLabels(session.labels),
          warned_percent: session.warned_percent,
          earmarks: session.earmarks.length === 0
            ? null
            : session.earmarks.map((earmark) => ({
              grant_id: earmark.grant_id,
              amount_usd: Money.format(earmark.amount)
            }))
        })
      }
      for (const grant of planned.grants.changed) write.grants.push({ wallet_id: walletId, ...grantWrite(grant) })
      for (const record of recordsOf(planned.decisions, entryIds)) {
        write.records.push({
          wallet_id: walletId,
          idempotency_key: record.idempotency_key,
          kind: record.job.kind,
          session_id: record.job.session_id,
          amount_usd: amount(record.job.amount_usd),
          ttl_seconds: record.job.ttl_seconds,
          outcome: record.outcome,
          entry_ids: record.entry_ids,
          unfunded_usd: amount(record.unfunded_usd),
          expires_at: record.expires_at?.toISOString() ?? null,
          limit_hit: record.limit === null ? null : encodedLimit(record.limit),
          cap_reached: record.cap_reached,
          max_reservable_usd: amount(record.max_reservable_usd)
        })
      }
      for (const total of planned.spendTotals) {
        write.totals.push({
          wallet_id: walletId,
          local_day: stateAccount.local_day,
          repository_id: total.repository_id,
          user_id: total.user_id,
          model: total.model,
          labels: storedLabels(total.labels),
          spent_usd: Money.format(total.spent),
          unfunded_usd: Money.format(total.unfunded),
          sessions: total.sessions
        })
      }
      write.announced.push(...announcementsOf(walletId, planned))
      // The batch's events, in its transition (an outbox, D17): the sessions as it writes them,
      // every row stamped with its time, a new session's creation too.
      const stamped = DateTime.toDate(time)
      for (
        const event of eventsOfPlan({
          before: walletOf(before),
          walletsAfter,
          notices: planned.notices,
          entries: moved.map(({ entry }) => entry),
          grant: (grantId) => {
            const row = grantRows.find((grant) => grant.id === grantId)
            const balance = planned.grants.all.find((grant) => grant.id === grantId)
            return row === undefined || balance === undefined
              ? undefined
              : grantView(grantRowOf(row, walletId), balance)
          },
          thresholds: input.thresholds,
          session: (sessionId) => {
            const session = planned.sessions.get(sessionId)
            return session === undefined
              ? undefined
              : sessionOf(sessionRowOf(session, found?.createdAt.get(sessionId) ?? stamped, stamped))
          }
        })
      ) {
        write.events.push({
          wallet_id: walletId,
          account_kind: account.kind,
          account_id: account.id,
          ...events.encode(event)
        })
      }
      return {
        walletId,
        moved: planned.movements.length,
        results: () => planned.decisions.map((decision) => exitOf(decision, entryIds, walletsAfter, after))
      }
    }

    const exitOf = (
      decision: Decision,
      entryIds: ReadonlyArray<string>,
      walletsAfter: ReadonlyArray<Wallet>,
      after: Wallet
    ): JobExit => {
      switch (decision._tag) {
        case "Retry":
          return Exit.fail(new SettlementDeferred({ message: decision.reason }))
        case "Refused":
          return Exit.fail(new SettlementRejected({ message: decision.reason }))
        default:
          return Exit.succeed(resultOf(decision, entryIds, walletsAfter, after))
      }
    }

    /**
     * The transition for some wallets' jobs: read, decide, write, in two round trips. A wallet that
     * another writer changed between the read and the write wrote nothing; its jobs are decided
     * again from a new read, up to `MAX_ATTEMPTS` times, then left to BullMQ's retries.
     */
    const settle = (groups: ReadonlyArray<WalletJobs>, tally: Tally) =>
      Effect.gen(function*() {
        const results: Array<JobExit> = []
        let pending = groups
        for (let attempt = 0; attempt < MAX_ATTEMPTS && pending.length > 0; attempt++) {
          const reserves = pending.flatMap((group) =>
            group.jobs.flatMap((job) => job.kind === "reserve" ? [job.payload] : [])
          )
          const state = yield* transition.read({
            accounts: pending.map((group) => group.accountId),
            keys: pending.flatMap((group) =>
              group.jobs.map((job) => ({ account_id: group.accountId, key: job.payload.idempotency_key }))
            ),
            sessions: pending.flatMap((group) =>
              [...new Set(group.jobs.map((job) => job.payload.session_id))].map((session_id) => ({
                account_id: group.accountId,
                session_id
              }))
            ),
            repositories: reserves.flatMap((payload) => payload.repository_id ?? []),
            users: reserves.flatMap((payload) => payload.user_id ?? []),
            members: pending.flatMap((group) =>
              group.jobs.flatMap((job) => job.kind === "reserve" ? membersOf(group.accountId, job.payload) : [])
            ),
            expire: pending.flatMap((group) => group.expire ? [group.accountId] : [])
          })
          // Every bound is judged by the read's time, the one the write stamps, not the worker's clock (D19).
          const now = nowOf(state)
          const owners = new Map(state.owners.map((owner) => [`${owner.owned}:${owner.id}`, owner.account_id]))
          const owner = (owned: "repository" | "user", id: string) => owners.get(`${owned}:${id.toLowerCase()}`)
          const found = byAccount(state)
          const thresholds = new Map(state.thresholds.map((row) => [row.account_id, thresholdsOf(row.thresholds)]))
          const write: WriteBuilder = {
            time: state.time,
            wallets: [],
            entries: [],
            sessions: [],
            records: [],
            totals: [],
            announced: [],
            events: [],
            grants: []
          }
          const decided: Array<
            {
              readonly group: WalletJobs
              readonly walletId: string
              readonly moved: number
              readonly results: () => Array<JobExit>
            }
          > = []
          const again: Array<WalletJobs> = []
          for (const group of pending) {
            const account = state.accounts.find((a) => a.id === group.accountId)
            // An unknown account fails its jobs for good.
            if (account === undefined) {
              const message = refusalMessage("account_not_found", `no account ${group.accountId}`)
              for (const place of group.places) results[place] = Exit.fail(new SettlementRejected({ message }))
              continue
            }
            // A repository or user not of the job's account fails it for good, applying nothing (D16).
            const jobs: Array<SettlementJob> = []
            const places: Array<number> = []
            group.jobs.forEach((job, i) => {
              const place = group.places[i] ?? -1
              const foreign = job.kind === "reserve" ? foreignAttribution(job.payload, account, owner) : undefined
              if (foreign === undefined) {
                jobs.push(job)
                places.push(place)
              } else results[place] = Exit.fail(new SettlementRejected({ message: foreign }))
            })
            const kept = { ...group, jobs, places }
            if (jobs.length === 0 && !group.expire) continue
            const wallet = decide({
              account,
              group: kept,
              state,
              found: found.get(account.id),
              thresholds: thresholds.get(account.id) ?? [],
              now,
              write
            })
            // Its wallet was created by another writer while it was read: read again.
            if (wallet === undefined) again.push(kept)
            else decided.push({ group: kept, ...wallet })
          }
          const written = write.wallets.length === 0 ? new Set<string>() : yield* transition.write(write)
          for (const { group, moved, results: exits, walletId } of decided) {
            if (!written.has(walletId)) {
              again.push(group)
              continue
            }
            tally.moved += moved
            exits().forEach((exit, i) => {
              const place = group.places[i]
              if (place !== undefined) results[place] = exit
            })
          }
          if (again.length > 0) metrics.recordConflicts(again.length)
          pending = again
        }
        for (const group of pending) {
          for (const place of group.places) {
            results[place] = Exit.fail(new SettlementDeferred({ message: "the wallet was busy with other writers" }))
          }
        }
        return results
      })

    /**
     * A batch whose transition failed applied nothing. When the database is away, no job is at
     * fault: all are retried. Otherwise one job may be (D8: one job never harms another), so the
     * batch is tried again in halves, one after the other (a wallet's jobs stay in arrival order),
     * down to the one job that fails alone and is retried by BullMQ.
     */
    const settleOrSplit = (groups: ReadonlyArray<WalletJobs>, tally: Tally): Effect.Effect<Array<JobExit>> =>
      settle(groups, tally).pipe(
        Effect.catchAllCause((cause) => {
          const halves = splitInHalves(groups)
          const error = Cause.squash(cause)
          if (halves === undefined || (isSqlError(error) && isDatabaseAway(error))) {
            return Effect.as(
              Effect.logWarning("Settlement batch failed; its jobs will be retried", cause),
              deferAll(groups, "the wallet could not be settled now")
            )
          }
          return Effect.map(
            Effect.forEach(halves, (half) => settleOrSplit(half, tally)),
            ([first = [], second = []]) => {
              // Results are indexed by place in the whole batch; each half fills its own places.
              const merged = [...first]
              second.forEach((exit, place) => {
                if (exit !== undefined) merged[place] = exit
              })
              return merged
            }
          )
        })
      )

    const deferAll = (groups: ReadonlyArray<WalletJobs>, message: string) => {
      const results: Array<JobExit> = []
      for (const group of groups) {
        for (const place of group.places) results[place] = Exit.fail(new SettlementDeferred({ message }))
      }
      return results
    }

    /** A batch of any wallets, settled by one transition. */
    const runBatch = (items: ReadonlyArray<Keyed<SettlementJob>>) =>
      Effect.gen(function*() {
        metrics.recordBatch(items.length)
        const groups = new Map<
          string,
          { accountId: string; jobs: Array<SettlementJob>; places: Array<number>; expire: boolean }
        >()
        items.forEach(({ item: job, key }, place) => {
          const group = groups.get(key) ?? { accountId: key, jobs: [], places: [], expire: false }
          group.jobs.push(job)
          group.places.push(place)
          groups.set(key, group)
        })
        const settled = yield* settleOrSplit([...groups.values()], { moved: 0 })
        return items.map((_, place) => settled[place] ?? Exit.die(new Error(`job ${place} of a batch was not decided`)))
      })

    /**
     * With traces exported (D18), each batch is a span, its SQL statements its children, linked to
     * the trace of every producer that passed its context in the job. Without, nothing is built.
     */
    const traced =
      <A, E, R>(run: (items: ReadonlyArray<Keyed<SettlementJob>>) => Effect.Effect<A, E, R>) =>
      (items: ReadonlyArray<Keyed<SettlementJob>>) =>
        Effect.flatMap(FiberRef.get(FiberRef.currentTracerEnabled), (enabled) =>
          enabled
            ? Effect.withSpan(run(items), "settlement.batch", {
              kind: "consumer",
              links: producerLinks(items),
              attributes: { "settlement.batch.size": items.length }
            })
            : run(items))

    // Keyed by account id: a wallet's jobs are decided in arrival order, never in two batches at once.
    const batcher = yield* makeBatcher<SettlementJob, SettlementResult, SettlementFailure>({
      maxBatch: MAX_BATCH,
      maxRunning: MAX_RUNNING_BATCHES,
      run: traced(runBatch)
    })

    /**
     * Applies one job (batched with its wallet's neighbours) and answers its D8 result. Runs for
     * every job, so it is not traced: a traced function captures two stack traces per call.
     */
    const apply = (job: SettlementJob) => batcher.submit(job.payload.account_id, job)

    /** `apply` for a queue's processor, outside Effect: `done` is called once with the job's result. */
    const offer = (job: SettlementJob, done: (exit: JobExit) => void) =>
      batcher.offer(job.payload.account_id, job, done)

    /**
     * Releases every hold past `RESERVATION_TTL_SECONDS`, with note `expired`, by the rules a
     * release follows, each at most once: by the same transition as a batch, which reads the
     * holds past their time with the wallet and writes only if no other writer came between.
     */
    const expireHolds = Effect.fn("Settlement.expireHolds")(function*() {
      const due = yield* repo.walletsWithExpiredHolds({ limit: EXPIRY_SWEEP_WALLETS })
      if (due.length === 0) return 0
      const tally = { moved: 0 }
      yield* settleOrSplit(
        due.map((wallet) => ({ accountId: wallet.account_id, jobs: [], places: [], expire: true })),
        tally
      )
      return tally.moved
    })

    /**
     * Ends every grant past its `expires_at` and sends the `grant.expiring` warnings due (D21),
     * whether or not any session runs: a batch of no jobs for each wallet with a grant due, by
     * the same transition, which ends a due grant before anything else (and, as the hold sweep,
     * releases its holds past their time). Answers how many wallets it settled.
     */
    const expireGrants = Effect.fn("Settlement.expireGrants")(function*() {
      const due = yield* repo.walletsWithDueGrants({ limit: EXPIRY_SWEEP_WALLETS })
      if (due.length === 0) return 0
      yield* settleOrSplit(
        due.map((wallet) => ({ accountId: wallet.account_id, jobs: [], places: [], expire: true })),
        { moved: 0 }
      )
      return due.length
    })

    /**
     * Removes the spends by the minute and quarter hour past keeping (D22), in chunks, at most
     * `PRUNE_CHUNKS` of them a run; answers how many rows it removed.
     */
    const pruneRecentSpends = Effect.fn("Settlement.pruneRecentSpends")(function*() {
      let removed = 0
      for (let chunk = 0; chunk < PRUNE_CHUNKS; chunk++) {
        const { removed: now } = yield* repo.pruneRecentSpends({ limit: PRUNE_CHUNK_ROWS })
        removed += now
        if (now < PRUNE_CHUNK_ROWS) break
      }
      return removed
    })

    return { apply, offer, expireHolds, expireGrants, pruneRecentSpends } as const
  }),
  dependencies: [
    SettlementTransition.Default,
    SettlementRepo.Default,
    SettlementMetrics.Default,
    Events.Default
  ]
}) {}
