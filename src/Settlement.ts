import { Cause, Clock, Data, DateTime, Duration, Effect, Exit, FiberRef } from "effect"
import { Accounts } from "./Accounts.js"
import { AppConfig } from "./Config.js"
import type { Account } from "./Domain/Account.js"
import type { NewEvent, Threshold } from "./Domain/Events.js"
import { refusalMessage } from "./Domain/SettlementSession.js"
import { utcDay } from "./Domain/SpendLimit.js"
import type { Wallet } from "./Domain/Wallet.js"
import { Events } from "./Events.js"
import { type Keyed, makeBatcher } from "./Settlement/Batcher.js"
import type { ReservePayload, SettlementJob, SettlementResult } from "./Settlement/Jobs.js"
import { SettlementMetrics } from "./Settlement/Metrics.js"
import { eventsOfPlan } from "./Settlement/Notices.js"
import {
  type Decision,
  type FirstOutcome,
  firstOutcomeOf,
  type Plan,
  plan,
  recordsOf,
  resultOf,
  type SessionState
} from "./Settlement/Plan.js"
import { type AnnouncedLimits, SettlementRepo } from "./Settlement/Repo.js"
import { sessionOf } from "./Settlement/Sessions.js"
import { sessionRowOf } from "./Settlement/SessionsRepo.js"
import { producerLinks } from "./Settlement/Tracing.js"
import { SpendLimitsRepo } from "./SpendControls/LimitsRepo.js"
import { isDatabaseAway, isSqlError } from "./Sql/Errors.js"
import { WalletLedger } from "./Wallets/Ledger.js"

/** A job that can never apply (unknown account, a reused key…): failing it for good is right; its message begins with its refusal code. */
export class SettlementRejected extends Data.TaggedError("SettlementRejected")<{ readonly message: string }> {}

/** A job that cannot apply yet (its session's reserve may be late): BullMQ retries it with backoff. */
export class SettlementDeferred extends Data.TaggedError("SettlementDeferred")<{ readonly message: string }> {}

export type SettlementFailure = SettlementRejected | SettlementDeferred

/** Jobs per transaction at most: bounds a transaction's time and its locks'. */
const MAX_BATCH = 200
/**
 * Transactions at once, per worker. One: a transaction costs the worker about as
 * much CPU as seven jobs do, and what arrives while it runs goes whole into the
 * next. A second one at a time kept the database busier but split the waiting
 * jobs into two smaller batches: measured at the bench's load, 23% more CPU per
 * job and 19% fewer jobs a second. More throughput comes from more workers (D14).
 */
export const MAX_RUNNING_BATCHES = 1
const EXPIRY_SWEEP_WALLETS = 100

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
    [{ account: only.account, jobs: only.jobs.slice(0, middle), places: only.places.slice(0, middle) }],
    [{ account: only.account, jobs: only.jobs.slice(middle), places: only.places.slice(middle) }]
  ]
}

/**
 * Why a reserve's attribution is not of its account (D16), as its refusal: a repository of
 * another account (or none) is `repository_not_found`, checked before the user's `user_not_found`.
 */
const foreignAttribution = (
  payload: ReservePayload,
  account: Account,
  owner: (owned: "repository" | "user", id: string) => Account | undefined
): string | undefined => {
  const isAccounts = (found: Account | undefined) =>
    found !== undefined && found.kind === account.kind && found.id === account.id
  if (payload.repository_id !== undefined && !isAccounts(owner("repository", payload.repository_id))) {
    return refusalMessage("repository_not_found", `no repository ${payload.repository_id} of account ${account.id}`)
  }
  if (payload.user_id !== undefined && !isAccounts(owner("user", payload.user_id))) {
    return refusalMessage("user_not_found", `no user ${payload.user_id} of account ${account.id}`)
  }
  return undefined
}

/** The limits a batch's `limit.reached` events announce (D17): written beside them, so never announced twice a period. */
const announcedOf = (plans: ReadonlyArray<Plan>): AnnouncedLimits =>
  plans.flatMap((plan) =>
    plan.notices.flatMap((notice) =>
      notice._tag === "LimitReached" && notice.limit.id !== null
        ? [{ limit_id: notice.limit.id, period_start: utcDay(notice.period_start) }]
        : []
    )
  )

/**
 * One wallet's events of a batch (D17), the sessions they show as the batch writes them: every
 * row it writes is stamped with its transaction's time, a new session's creation too.
 */
const batchEvents = (input: {
  readonly before: Wallet
  readonly walletsAfter: ReadonlyArray<Wallet>
  readonly plan: Plan
  readonly thresholds: ReadonlyArray<Threshold>
  /** When the sessions the batch found were created; the others are created by it. */
  readonly createdAt: ReadonlyMap<string, Date>
  readonly time: Date
}): ReadonlyArray<NewEvent> =>
  eventsOfPlan({
    before: input.before,
    walletsAfter: input.walletsAfter,
    notices: input.plan.notices,
    thresholds: input.thresholds,
    session: (sessionId) => {
      const session = input.plan.sessions.get(sessionId)
      return session === undefined
        ? undefined
        : sessionOf(sessionRowOf(session, input.createdAt.get(sessionId) ?? input.time, input.time))
    }
  })

/** One wallet's part of a batch: its account, its jobs in arrival order, and their places in the batch. */
interface WalletJobs {
  readonly account: Account
  readonly jobs: Array<SettlementJob>
  readonly places: Array<number>
}

/**
 * Settles session money (D8): reserve before a run, spend while it runs,
 * release the rest, each job exactly once by its idempotency key. Jobs that
 * arrive together, of one wallet or of many, are applied in one transaction
 * (one lock statement, one commit), each with its own ledger entry, record and
 * result; a job that is refused or deferred never spoils the others in its batch.
 */
export class Settlement extends Effect.Service<Settlement>()("Settlement", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const walletLedger = yield* WalletLedger
    const accounts = yield* Accounts
    const repo = yield* SettlementRepo
    const limitsRepo = yield* SpendLimitsRepo
    const metrics = yield* SettlementMetrics
    const events = yield* Events
    const reservationTtlMs = Duration.toMillis(config.reservationTtl)

    /**
     * A batch in one transaction of five round trips, whatever its wallets:
     * begin, one lock statement, one read (keys, sessions, limits, thresholds),
     * one write (entries, wallets, sessions, records, totals, events), commit.
     * Each wallet's jobs are decided in arrival order against that wallet alone.
     */
    const applyBatch = (groups: ReadonlyArray<WalletJobs>) =>
      walletLedger.withLocks(groups.map((group) => group.account), (ledgers) =>
        Effect.gen(function*() {
          const locked = yield* Effect.forEach(groups, (group) => {
            const ledger = ledgers.writers.get(group.account.id)
            return ledger === undefined
              ? Effect.dieMessage(`the wallet of ${group.account.id} is not locked`)
              : Effect.map(ledger.wallet, (before) => ({ ...group, ledger, before }))
          })
          const walletIds = new Map(locked.map(({ account, before }) => [before.id, account.id]))
          const now = new Date(yield* Clock.currentTimeMillis)
          const accounts = locked.map(({ account }) => account)
          // One statement, after the wallets' locks, which every writer of the accounts' money takes
          // first: the keys' first outcomes, the sessions, and the limits with their use (no other
          // transaction can move a limit's use until this one commits, so the check is atomic, D16)
          // and the thresholds as saved now.
          const read = yield* repo.findBatchState(
            {
              keys: locked.flatMap(({ before, jobs }) =>
                jobs.map((job) => ({ wallet_id: before.id, idempotency_key: job.payload.idempotency_key }))
              ),
              sessions: locked.flatMap(({ before, jobs }) =>
                [...new Set(jobs.map((job) => job.payload.session_id))].map((session_id) => ({
                  wallet_id: before.id,
                  session_id
                }))
              )
            },
            limitsRepo.usedEmbedded(accounts, now),
            events.thresholdsEmbedded(accounts)
          )
          const limits = new Map(read.limits.map((found) => [found.account.id, found]))
          const { state, thresholds } = read
          const sessions = new Map<string, Map<string, SessionState>>()
          const createdAt = new Map<string, Map<string, Date>>()
          const firstOutcomes = new Map<string, Map<string, FirstOutcome>>()
          for (const row of state) {
            const accountId = walletIds.get(row.wallet_id) ?? row.wallet_id
            if (row._tag === "Session") {
              sessions.set(accountId, (sessions.get(accountId) ?? new Map()).set(row.session.session_id, row.session))
              createdAt.set(
                accountId,
                (createdAt.get(accountId) ?? new Map()).set(row.session.session_id, row.created_at)
              )
            } else {
              firstOutcomes.set(
                accountId,
                (firstOutcomes.get(accountId) ?? new Map()).set(row.idempotency_key, firstOutcomeOf(row.first))
              )
            }
          }
          const planned = locked.map((group) => ({
            ...group,
            plan: plan({
              balances: {
                budget: group.before.budget_usd,
                reserved: group.before.reserved_usd,
                spent: group.before.spent_usd
              },
              enforced: group.before.enforced,
              sessions: sessions.get(group.account.id) ?? new Map(),
              firstOutcomes: firstOutcomes.get(group.account.id) ?? new Map(),
              jobs: group.jobs,
              now,
              reservationTtlMs,
              limits: limits.get(group.account.id)?.limits ?? [],
              announcedLimits: limits.get(group.account.id)?.announced ?? new Set()
            })
          }))
          // The movements as they will be written: the batch's one statement writes them beside its own facts.
          const staged = yield* ledgers.stageEach(
            planned.map((group) => [group.account, group.plan.movements] as const)
          )
          const written = planned.map((group, i) => {
            const moved = staged.moved[i] ?? []
            return {
              ...group,
              entryIds: moved.map(({ entry }) => entry.id),
              walletsAfter: moved.map(({ wallet }) => wallet)
            }
          })
          const time = DateTime.toDate(ledgers.time)
          const added = yield* repo.saveBatch({
            sessions: written.flatMap(({ before, plan }) =>
              [...plan.sessions.values()].map((session) => ({ ...session, wallet_id: before.id }))
            ),
            records: written.flatMap(({ before, entryIds, plan }) =>
              recordsOf(plan.decisions, entryIds).map((record) => ({ ...record, wallet_id: before.id }))
            ),
            totals: written.flatMap(({ before, plan }) =>
              plan.spendTotals.map((total) => ({ ...total, wallet_id: before.id }))
            ),
            announced: announcedOf(written.map(({ plan }) => plan)),
            ledger: staged,
            // The batch's events, in its transaction (an outbox, D17), in the same statement.
            events: events.appending(written.flatMap(({ account, before, plan, walletsAfter }) =>
              batchEvents({
                before,
                walletsAfter,
                plan,
                thresholds: thresholds.get(account.id) ?? [],
                createdAt: createdAt.get(account.id) ?? new Map(),
                time
              }).map((event) => ({ account, event }))
            ))
          })
          yield* ledgers.confirm(staged, added)
          const results: Array<Exit.Exit<SettlementResult, SettlementFailure>> = []
          for (const { entryIds, ledger, places, plan, walletsAfter } of written) {
            const after = yield* ledger.wallet
            plan.decisions.forEach((decision, i) => {
              const place = places[i]
              if (place !== undefined) results[place] = exitOf(decision, entryIds, walletsAfter, after)
            })
          }
          return results
        }))

    const exitOf = (
      decision: Decision,
      entryIds: ReadonlyArray<string>,
      walletsAfter: ReadonlyArray<Wallet>,
      after: Wallet
    ): Exit.Exit<SettlementResult, SettlementFailure> => {
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
     * A batch whose transaction failed applied nothing. When the database is
     * away, no job is at fault: all are retried. Otherwise one job may be
     * (D8: one job never harms another), so the batch is tried again in
     * halves, one after the other (a wallet's jobs stay in arrival order),
     * down to the one job that fails alone and is retried by BullMQ.
     */
    const applyOrSplit = (
      groups: ReadonlyArray<WalletJobs>
    ): Effect.Effect<Array<Exit.Exit<SettlementResult, SettlementFailure>>> =>
      applyBatch(groups).pipe(
        Effect.catchAllCause((cause) => {
          const halves = splitInHalves(groups)
          const error = Cause.squash(cause)
          if (halves === undefined || (isSqlError(error) && isDatabaseAway(error))) {
            return Effect.as(
              Effect.logWarning("Settlement batch failed; its jobs will be retried", cause),
              deferAll(groups, "the wallet could not be settled now")
            )
          }
          return Effect.map(Effect.forEach(halves, applyOrSplit), ([first = [], second = []]) => {
            // Results are indexed by place in the whole batch; each half fills its own places.
            const merged = [...first]
            second.forEach((exit, place) => {
              if (exit !== undefined) merged[place] = exit
            })
            return merged
          })
        })
      )

    const deferAll = (groups: ReadonlyArray<WalletJobs>, message: string) => {
      const results: Array<Exit.Exit<SettlementResult, SettlementFailure>> = []
      for (const group of groups) {
        for (const place of group.places) results[place] = Exit.fail(new SettlementDeferred({ message }))
      }
      return results
    }

    /** A batch of any wallets: their accounts looked up in one statement, then one transaction for all. */
    const runBatch = (items: ReadonlyArray<Keyed<SettlementJob>>) =>
      Effect.gen(function*() {
        metrics.recordBatch(items.length)
        const accountsById = yield* accounts.findAccounts(items.map((item) => item.key))
        const attributed = items.flatMap(({ item: job }) =>
          job.kind === "reserve" && (job.payload.repository_id !== undefined || job.payload.user_id !== undefined)
            ? [job.payload]
            : []
        )
        // Only a batch with an attributed reserve asks who owns what: one statement, or none.
        const owners = attributed.length === 0 ? { owner: () => undefined } : yield* accounts.findOwners({
          repositoryIds: attributed.flatMap((payload) => payload.repository_id ?? []),
          userIds: attributed.flatMap((payload) => payload.user_id ?? [])
        })
        const results: Array<Exit.Exit<SettlementResult, SettlementFailure>> = []
        const groups = new Map<string, WalletJobs>()
        items.forEach(({ item: job, key }, place) => {
          const account = accountsById.get(key)
          // An unknown account fails its jobs for good.
          if (account === undefined) {
            results[place] = Exit.fail(
              new SettlementRejected({ message: refusalMessage("account_not_found", `no account ${key}`) })
            )
            return
          }
          // A repository or user not of the job's account fails it for good, applying nothing (D16).
          const foreign = job.kind === "reserve" ? foreignAttribution(job.payload, account, owners.owner) : undefined
          if (foreign !== undefined) {
            results[place] = Exit.fail(new SettlementRejected({ message: foreign }))
            return
          }
          const group = groups.get(key) ?? { account, jobs: [], places: [] }
          group.jobs.push(job)
          group.places.push(place)
          groups.set(key, group)
        })
        if (groups.size === 0) return results
        const applied = yield* applyOrSplit([...groups.values()])
        return items.map((_, place) =>
          results[place] ?? applied[place] ?? Exit.die(new Error(`job ${place} of a batch was not decided`))
        )
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

    // Keyed by account id: a wallet's jobs are decided in arrival order, never in two transactions at once.
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
    const offer = (job: SettlementJob, done: (exit: Exit.Exit<SettlementResult, SettlementFailure>) => void) =>
      batcher.offer(job.payload.account_id, job, done)

    /** Releases every hold past `RESERVATION_TTL_SECONDS`, with note `expired`, by the rules a release follows; each at most once. */
    const expireHolds = Effect.fn("Settlement.expireHolds")(function*() {
      const due = yield* repo.walletsWithExpiredHolds({ limit: EXPIRY_SWEEP_WALLETS })
      let released = 0
      for (const wallet of due) {
        const account = { kind: wallet.account_kind, id: wallet.account_id }
        released += yield* walletLedger.withLocks([account], (ledgers) =>
          Effect.gen(function*() {
            const ledger = ledgers.writers.get(account.id)
            if (ledger === undefined) return yield* Effect.dieMessage(`the wallet of ${account.id} is not locked`)
            // Read under the lock: a release that raced the sweep has already closed the hold.
            const expired = yield* repo.expiredSessions(wallet.wallet_id)
            const before = yield* ledger.wallet
            const swept = plan({
              balances: { budget: before.budget_usd, reserved: before.reserved_usd, spent: before.spent_usd },
              enforced: before.enforced,
              sessions: new Map(expired.map(({ session }) => [session.session_id, session])),
              firstOutcomes: new Map(),
              jobs: [],
              expire: expired.map(({ session }) => session.session_id),
              now: new Date(yield* Clock.currentTimeMillis),
              reservationTtlMs
            })
            const staged = yield* ledgers.stageEach([[account, swept.movements]])
            const moved = staged.moved[0] ?? []
            const thresholds = yield* events.thresholdsOf(moved.length > 0 ? [account] : [])
            const added = yield* repo.saveBatch({
              sessions: [...swept.sessions.values()].map((session) => ({ ...session, wallet_id: wallet.wallet_id })),
              records: [],
              totals: [],
              announced: announcedOf([swept]),
              ledger: staged,
              // Expiry moves money and closes sessions as a release does: the same events, in the same statement.
              events: events.appending(
                batchEvents({
                  before,
                  walletsAfter: moved.map(({ wallet }) => wallet),
                  plan: swept,
                  thresholds: thresholds.get(account.id) ?? [],
                  createdAt: new Map(expired.map(({ created_at, session }) => [session.session_id, created_at])),
                  time: DateTime.toDate(ledgers.time)
                }).map((event) => ({ account, event }))
              )
            })
            yield* ledgers.confirm(staged, added)
            return swept.movements.length
          }))
      }
      return released
    })

    return { apply, offer, expireHolds } as const
  }),
  dependencies: [
    WalletLedger.Default,
    Accounts.Default,
    SettlementRepo.Default,
    SpendLimitsRepo.Default,
    SettlementMetrics.Default,
    Events.Default
  ]
}) {}
