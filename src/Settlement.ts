import { Data, Duration, Effect, Exit, Option, Schema } from "effect"
import { Accounts } from "./Accounts.js"
import { AppConfig } from "./Config.js"
import type { Account } from "./Domain/Account.js"
import * as Money from "./Domain/Money.js"
import { Wallet } from "./Domain/Wallet.js"
import { makeBatcher } from "./Settlement/Batcher.js"
import type { SettlementJob, SettlementResult } from "./Settlement/Jobs.js"
import { SettlementMetrics } from "./Settlement/Metrics.js"
import { type Decision, type FirstOutcome, plan, type SessionState } from "./Settlement/Plan.js"
import { type NewRecord, type RecordRow, SettlementRepo } from "./Settlement/Repo.js"
import { type Moved, Wallets } from "./Wallets.js"

/** A job that can never apply (unknown account): failing it for good is right. */
export class SettlementRejected extends Data.TaggedError("SettlementRejected")<{ readonly message: string }> {}

/** A job that cannot apply yet (its session's reserve may be late): BullMQ retries it with backoff. */
export class SettlementDeferred extends Data.TaggedError("SettlementDeferred")<{ readonly message: string }> {}

export type SettlementFailure = SettlementRejected | SettlementDeferred

/** Jobs of one wallet per transaction at most: bounds a transaction's time and its lock's. */
const MAX_BATCH = 200
const EXPIRY_SWEEP_WALLETS = 100

const encodeWallet = Schema.encodeSync(Wallet)

const firstOutcomeOf = (record: RecordRow): FirstOutcome => ({
  outcome: record.outcome,
  entries: { _tag: "Stored", ids: record.entry_ids },
  unfunded_usd: record.unfunded_usd
})

/**
 * Settles session money (D8): reserve before a run, spend while it runs,
 * release the rest, each job exactly once by its idempotency key. Jobs of one
 * wallet that arrive together are applied in one transaction (one lock, one
 * commit), each with its own ledger entry, record and result; a job that is
 * refused or deferred never spoils the others in its batch.
 */
export class Settlement extends Effect.Service<Settlement>()("Settlement", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const wallets = yield* Wallets
    const accounts = yield* Accounts
    const repo = yield* SettlementRepo
    const metrics = yield* SettlementMetrics
    const reservationTtlMs = Duration.toMillis(config.reservationTtl)

    const accountOf = (accountId: string) =>
      Effect.flatMap(accounts.findAccount(accountId), (account) =>
        Option.match(account, {
          onNone: () => Effect.fail(new SettlementRejected({ message: `no account ${accountId}` })),
          onSome: Effect.succeed
        }))

    /** One wallet's batch in one transaction; one Exit per job, in order. */
    const applyBatch = (account: Account, jobs: ReadonlyArray<SettlementJob>) =>
      wallets.withLock(account, (ledger) =>
        Effect.gen(function*() {
          const before = yield* ledger.wallet
          const keys = [...new Set(jobs.map((job) => job.payload.idempotency_key))]
          const sessionIds = [...new Set(jobs.map((job) => job.payload.session_id))]
          const state = yield* repo.findBatchState({ wallet_id: before.id, keys, session_ids: sessionIds }).pipe(
            Effect.orDie
          )
          const sessions = new Map<string, SessionState>()
          const firstOutcomes = new Map<string, FirstOutcome>()
          for (const row of state) {
            if (row.row_kind === "session") sessions.set(row.session_id, row)
            else firstOutcomes.set(row.idempotency_key, firstOutcomeOf(row))
          }
          const planned = plan({
            balances: { budget: before.budget_usd, reserved: before.reserved_usd, spent: before.spent_usd },
            enforced: before.enforced,
            sessions,
            firstOutcomes,
            jobs,
            now: new Date(),
            reservationTtlMs
          })
          const moved = yield* ledger.moveAll(planned.movements)
          const entryIds = (first: FirstOutcome) =>
            first.entries._tag === "Stored"
              ? first.entries.ids
              : first.entries.indexes.flatMap((index) => moved[index]?.entry.id ?? [])
          const records = planned.decisions.flatMap((decision): Array<NewRecord> =>
            decision._tag === "Decided"
              ? [{
                idempotency_key: decision.job.payload.idempotency_key,
                kind: decision.job.kind,
                session_id: decision.job.payload.session_id,
                outcome: decision.first.outcome,
                entry_ids: entryIds(decision.first),
                unfunded_usd: decision.first.unfunded_usd === null ? null : Money.format(decision.first.unfunded_usd)
              }]
              : []
          )
          yield* repo.saveBatch(before.id, [...planned.sessions.values()], records).pipe(Effect.orDie)
          const after = yield* ledger.wallet
          return planned.decisions.map((decision) => resultOf(decision, entryIds, moved, after))
        })
      )

    const resultOf = (
      decision: Decision,
      entryIds: (first: FirstOutcome) => ReadonlyArray<string>,
      moved: ReadonlyArray<Moved>,
      after: Wallet
    ): Exit.Exit<SettlementResult, SettlementFailure> => {
      if (decision._tag === "Retry") return Exit.fail(new SettlementDeferred({ message: decision.reason }))
      const ids = entryIds(decision.first)
      const own = decision._tag === "Decided" && decision.first.entries._tag === "Planned"
        ? decision.first.entries.indexes.at(-1)
        : undefined
      // The wallet right after the job's own movement; after the batch for a refusal or a duplicate.
      const wallet = own === undefined ? after : moved[own]?.wallet ?? after
      const unfunded = decision.job.kind === "spend" && decision.first.unfunded_usd !== null
        ? { unfunded_usd: Money.format(decision.first.unfunded_usd) }
        : {}
      return Exit.succeed({
        status: decision._tag === "Duplicate" ? "duplicate" : decision.first.outcome,
        ...(decision._tag === "Duplicate" ? { first_status: decision.first.outcome } : {}),
        entry_ids: [...ids],
        wallet: encodeWallet(wallet),
        ...unfunded
      })
    }

    // Keyed by account id: the account is looked up once per batch, not once per job.
    const batcher = yield* makeBatcher<SettlementJob, SettlementResult, SettlementFailure>({
      maxBatch: MAX_BATCH,
      run: (accountId, jobs) => {
        if (jobs.length === 0) return Effect.succeed([])
        metrics.recordBatch(jobs.length)
        return accountOf(accountId).pipe(
          Effect.flatMap((account) => applyBatch(account, jobs)),
          // An unknown account fails each of its jobs for good.
          Effect.catchTag("SettlementRejected", (rejected) => Effect.succeed(jobs.map(() => Exit.fail(rejected)))),
          // A batch that cannot commit (database away, lock timeout) applied nothing: every job in it is retried.
          Effect.catchAllCause((cause) =>
            Effect.as(
              Effect.logWarning("Settlement batch failed; its jobs will be retried", cause),
              jobs.map(() => Exit.fail(new SettlementDeferred({ message: "the wallet could not be settled now" })))
            )
          )
        )
      }
    })

    /** Applies one job (batched with its wallet's neighbours) and answers its D8 result. */
    const apply = Effect.fn("Settlement.apply")(function*(job: SettlementJob) {
      return yield* batcher.submit(job.payload.account_id, job)
    })

    /** Releases every hold past `RESERVATION_TTL_SECONDS`, with note `expired`; each at most once. */
    const expireHolds = Effect.fn("Settlement.expireHolds")(function*() {
      const due = yield* repo.walletsWithExpiredHolds({ limit: EXPIRY_SWEEP_WALLETS }).pipe(Effect.orDie)
      let released = 0
      for (const wallet of due) {
        released += yield* wallets.withLock({ kind: wallet.account_kind, id: wallet.account_id }, (ledger) =>
          Effect.gen(function*() {
            // Read under the lock: a release that raced the sweep has already closed the hold.
            const expired = yield* repo.expiredSessions(wallet.wallet_id).pipe(Effect.orDie)
            const holding = expired.filter((session) => session.held.gt(Money.zero))
            yield* ledger.moveAll(holding.map((session) => ({
              kind: "reserve_release" as const,
              amount_usd: session.held,
              session_id: session.session_id,
              task_id: session.task_id,
              note: "expired"
            })))
            yield* repo.upsertSessions(
              wallet.wallet_id,
              expired.map((session) => ({ ...session, held: Money.zero, state: "expired" as const }))
            ).pipe(Effect.orDie)
            return holding.length
          })
        )
      }
      return released
    })

    return { apply, expireHolds } as const
  }),
  dependencies: [Wallets.Default, Accounts.Default, SettlementRepo.Default, SettlementMetrics.Default]
}) {}
