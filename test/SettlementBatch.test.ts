import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { randomUUID } from "node:crypto"
import type { Account } from "../src/Domain/Account.js"
import { MAX_RUNNING_BATCHES, Settlement, type SettlementFailure } from "../src/Settlement.js"
import type { SettlementJob, SettlementResult } from "../src/Settlement/Jobs.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * Batches seen from the database: `Settlement.apply` is called directly, many
 * jobs of one wallet at once, so that they share a transaction. Rows written in
 * one transaction carry its id in `xmin`, which tells which jobs were batched.
 */

const reserve = (
  account: Account,
  session_id: string,
  amount_usd: string,
  idempotency_key = randomUUID()
): SettlementJob => ({
  kind: "reserve",
  payload: { account_id: account.id, session_id, amount_usd, idempotency_key }
})
const spend = (
  account: Account,
  session_id: string,
  amount_usd: string,
  idempotency_key = randomUUID()
): SettlementJob => ({
  kind: "spend",
  payload: { account_id: account.id, session_id, amount_usd, idempotency_key }
})
const release = (account: Account, session_id: string, idempotency_key = randomUUID()): SettlementJob => ({
  kind: "release",
  payload: { account_id: account.id, session_id, idempotency_key }
})

type Outcome = Exit.Exit<SettlementResult, SettlementFailure>

const apply = (job: SettlementJob) => Effect.flatMap(Settlement, (settlement) => Effect.exit(settlement.apply(job)))

const succeeded = (outcome: Outcome | undefined): SettlementResult => {
  if (outcome === undefined || Exit.isFailure(outcome)) throw new Error(`expected a result, got ${String(outcome)}`)
  return outcome.value
}

const deferredReason = (outcome: Outcome | undefined): string => {
  if (outcome === undefined || Exit.isSuccess(outcome)) {
    throw new Error(`expected a deferral, got ${JSON.stringify(outcome)}`)
  }
  const failure = outcome.cause._tag === "Fail" ? outcome.cause.error : undefined
  if (failure?._tag !== "SettlementDeferred") {
    throw new Error(`expected SettlementDeferred, got ${String(outcome.cause)}`)
  }
  return failure.message
}

interface EntryRow {
  readonly id: string
  readonly sequence: string
  readonly kind: string
  readonly amount_usd: string
  readonly reserved_after_usd: string
  readonly session_id: string | null
  readonly tx: string
}

interface RecordRow {
  readonly idempotency_key: string
  readonly outcome: string
  readonly entry_ids: ReadonlyArray<string>
  readonly tx: string
}

const entriesOf = (account: Account) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<
        EntryRow
      >`SELECT e.id, e.sequence::text AS sequence, e.kind, e.amount_usd, e.reserved_after_usd, e.session_id, e.xmin::text AS tx
                  FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
                  WHERE w.account_id = ${account.id} ORDER BY e.sequence`
  ).pipe(Effect.orDie)

const recordsOf = (account: Account) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<RecordRow>`SELECT r.idempotency_key, r.outcome, r.entry_ids::text[] AS entry_ids, r.xmin::text AS tx
                   FROM settlement_records r JOIN wallets w ON w.id = r.wallet_id
                   WHERE w.account_id = ${account.id}`
  ).pipe(Effect.orDie)

const sessionsOf = (account: Account) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<
        { readonly session_id: string }
      >`SELECT s.session_id FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
                                         WHERE w.account_id = ${account.id}`
  ).pipe(Effect.orDie)

const walletRow = (account: Account) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly reserved_usd: string; readonly spent_usd: string; readonly last_sequence: string }>`
      SELECT reserved_usd, spent_usd, last_sequence::text AS last_sequence FROM wallets WHERE account_id = ${account.id}`
  ).pipe(
    Effect.flatMap((rows) => rows[0] === undefined ? Effect.dieMessage("no wallet") : Effect.succeed(rows[0])),
    Effect.orDie
  )

/** Polls `check` every 20 ms until it holds, for at most 20 s. */
const eventually = <R>(what: string, check: Effect.Effect<boolean, never, R>) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 1000; attempt++) {
      if (yield* check) return
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`timed out waiting until ${what}`)
  })

/** Backends of this database other than the caller's, by what they are doing. */
const backends = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) =>
    sql<{ readonly waiting: string; readonly running: string }>`
    SELECT count(*) FILTER (WHERE wait_event_type = 'Lock')::text AS waiting,
           count(*) FILTER (WHERE state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock')::text AS running
    FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
).pipe(
  Effect.map((rows) => ({ waiting: Number(rows[0]?.waiting ?? 0), running: Number(rows[0]?.running ?? 0) })),
  Effect.orDie
)

/**
 * Applies `jobs` so that they land in one batch: other transactions hold the
 * wallets of `blockers`, as slow batches would; a first job for each blocker
 * takes a turn and waits on its lock, so every job submitted meanwhile joins
 * the next batch, either because its wallet is busy or because every turn
 * is taken. The locks are let go once nothing else is running, and well
 * within the 2 s lock timeout.
 */
const afterBusyBatches = (blockers: ReadonlyArray<Account>, jobs: ReadonlyArray<SettlementJob>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const letGo = yield* Deferred.make<void>()
    const holder = yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT 1 FROM wallets WHERE account_id IN ${sql.in(blockers.map((b) => b.id))} FOR UPDATE`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(letGo)
    })).pipe(Effect.orDie, Effect.fork)
    yield* Deferred.await(locked)
    const firsts = yield* Effect.fork(
      Effect.all(blockers.map((blocker) => apply(reserve(blocker, "first-in-line", "0.000001"))), {
        concurrency: "unbounded"
      })
    )
    yield* eventually(
      "the first batches wait on their wallets",
      Effect.map(backends, (b) => b.waiting === blockers.length)
    )
    const rest = yield* Effect.fork(Effect.all(jobs.map(apply), { concurrency: "unbounded" }))
    yield* Effect.sleep("100 millis")
    yield* eventually("nothing else is running", Effect.map(backends, (b) => b.running === 0))
    yield* Effect.sleep("50 millis")
    yield* Deferred.succeed(letGo, undefined)
    yield* Fiber.join(holder)
    return { firsts: yield* Fiber.join(firsts), results: yield* Fiber.join(rest) }
  })

/** Applies jobs of one wallet so that they land in one batch, behind a first job of that wallet. */
const inOneBatch = (account: Account, jobs: ReadonlyArray<SettlementJob>) =>
  Effect.map(afterBusyBatches([account], jobs), ({ firsts, results }) => ({ first: firsts[0], results }))

layer(TestSettlement(), { excludeTestServices: true, timeout: "60 seconds" })("settlement batches", (it) => {
  describe("a batch", () => {
    it.effect("applies jobs that arrive together in one transaction, each with its own entry, record and result", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("100")
        const jobs = Array.from({ length: 12 }, (_, i) => reserve(account, `s-${i}`, `${i + 1}`))
        const { first, results } = yield* inOneBatch(account, jobs)
        expect(succeeded(first).status).toBe("applied")

        const entries = yield* entriesOf(account)
        const records = yield* recordsOf(account)
        const byId = new Map(entries.map((entry) => [entry.id, entry]))
        const batch = new Set<string>()
        for (const [i, outcome] of results.entries()) {
          const result = succeeded(outcome)
          expect(result.status).toBe("applied")
          expect(result.entry_ids).toHaveLength(1)
          const entry = byId.get(result.entry_ids[0] ?? "")
          expect(entry).toMatchObject({ kind: "reserve", session_id: `s-${i}`, amount_usd: `${i + 1}.000000` })
          // The wallet in each result is the one right after that job's own entry.
          expect(result.wallet.reserved_usd).toBe(entry?.reserved_after_usd)
          const record = records.find((r) => r.idempotency_key === jobs[i]?.payload.idempotency_key)
          expect(record).toMatchObject({ outcome: "applied", entry_ids: result.entry_ids, tx: entry?.tx })
          batch.add(entry?.tx ?? "")
        }
        // One transaction wrote all twelve: one lock, one commit.
        expect(batch.size).toBe(1)
        expect(new Set(results.flatMap((r) => succeeded(r).entry_ids)).size).toBe(12)
        expect(entries.find((entry) => entry.session_id === "first-in-line")?.tx).not.toBe([...batch][0])
        expect(entries.map((entry) => Number(entry.sequence))).toEqual(Array.from({ length: 14 }, (_, i) => i + 1))
        expect((yield* walletRow(account)).reserved_usd).toBe("78.000001")
      }))

    it.effect("a refused or deferred job never spoils the others in its batch", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("20")
        succeeded(yield* apply(reserve(account, "known", "5")))
        const jobs = [
          reserve(account, "a", "3"),
          reserve(account, "too-big", "20"),
          spend(account, "ghost", "1"),
          spend(account, "known", "2"),
          release(account, "ghost"),
          reserve(account, "b", "4")
        ]
        const { results } = yield* inOneBatch(account, jobs)
        const [a, tooBig, ghostSpend, known, ghostRelease, b] = results
        const [, tooBigJob, ghostSpendJob, , ghostReleaseJob] = jobs

        expect(succeeded(a).status).toBe("applied")
        expect(succeeded(known)).toMatchObject({ status: "applied", unfunded_usd: "0.000000" })
        expect(succeeded(b).status).toBe("applied")
        expect(succeeded(tooBig)).toMatchObject({ status: "insufficient_funds", entry_ids: [] })
        // Deferred by the rules (its reserve may be late), not by a failed batch.
        expect(deferredReason(ghostSpend)).toBe("session ghost is not known yet")
        expect(deferredReason(ghostRelease)).toBe("session ghost is not known yet")

        const records = yield* recordsOf(account)
        const entries = yield* entriesOf(account)
        const txOf = (outcome: Outcome | undefined) =>
          entries.find((entry) => entry.id === succeeded(outcome).entry_ids[0])?.tx
        const tx = txOf(a)
        expect(tx).toBeDefined()
        expect([txOf(known), txOf(b)]).toEqual([tx, tx])
        // The refusal is recorded in the same transaction as its neighbours' movements.
        expect(records.find((r) => r.idempotency_key === tooBigJob?.payload.idempotency_key)).toMatchObject({
          outcome: "insufficient_funds",
          entry_ids: [],
          tx
        })
        // The deferred jobs left no trace: no record, no entry, no session.
        for (const deferred of [ghostSpendJob, ghostReleaseJob]) {
          expect(records.find((r) => r.idempotency_key === deferred?.payload.idempotency_key)).toBeUndefined()
        }
        expect(entries.filter((entry) => entry.session_id === "ghost" || entry.session_id === "too-big")).toEqual([])
        // The refused reserve's session is known, holding nothing (D12): its release would be answered at once.
        expect((yield* sessionsOf(account)).map((s) => s.session_id).sort()).toEqual([
          "a",
          "b",
          "first-in-line",
          "known",
          "too-big"
        ])
        expect(yield* walletRow(account)).toMatchObject({ reserved_usd: "10.000001", spent_usd: "2.000000" })

        // Once the session is known the deferred jobs apply; the refusal stays refused.
        succeeded(yield* apply(reserve(account, "ghost", "1")))
        const [spent, released, refusedAgain] = yield* Effect.forEach(
          [ghostSpendJob, ghostReleaseJob, tooBigJob],
          (job) => job === undefined ? Effect.dieMessage("a job is missing") : apply(job)
        )
        expect(succeeded(spent)).toMatchObject({ status: "applied", unfunded_usd: "0.000000" })
        expect(succeeded(released).status).toBe("nothing_to_release")
        expect(succeeded(refusedAgain)).toMatchObject({ status: "duplicate", first_status: "insufficient_funds" })
      }))

    it.effect("jobs of many wallets that arrive together share one transaction; an unknown account or a refusal spoils none", () =>
      Effect.gen(function*() {
        // Every turn is taken by a batch waiting on a lock, so what arrives meanwhile goes in one batch.
        const blockers = yield* Effect.all(Array.from({ length: MAX_RUNNING_BATCHES }, () => newAccount("10")))
        const [c, d, e] = yield* Effect.all([newAccount("10"), newAccount("10"), newAccount("10")])
        if (c === undefined || d === undefined || e === undefined) return yield* Effect.dieMessage("accounts missing")
        succeeded(yield* apply(reserve(e, "known", "4")))
        const unknown: Account = { kind: "client", id: randomUUID() }
        const jobs = [
          reserve(c, "c-1", "1"),
          reserve(d, "d-too-big", "11"),
          reserve(unknown, "u-1", "1"),
          spend(e, "known", "3"),
          reserve(d, "d-1", "2"),
          spend(e, "ghost", "1"),
          reserve(c, "c-2", "2")
        ]
        const { firsts, results } = yield* afterBusyBatches(blockers, jobs)
        for (const first of firsts) expect(succeeded(first).status).toBe("applied")
        const [c1, dTooBig, u1, eKnown, d1, eGhost, c2] = results

        expect(succeeded(c1).status).toBe("applied")
        expect(succeeded(c2).status).toBe("applied")
        expect(succeeded(d1).status).toBe("applied")
        expect(succeeded(eKnown)).toMatchObject({ status: "applied", unfunded_usd: "0.000000" })
        expect(succeeded(dTooBig)).toMatchObject({ status: "insufficient_funds", entry_ids: [] })
        expect(deferredReason(eGhost)).toBe("session ghost is not known yet")
        // An unknown account fails its job for good, and only its job.
        const failure = u1 !== undefined && Exit.isFailure(u1) && u1.cause._tag === "Fail" ? u1.cause.error : undefined
        expect(failure?._tag).toBe("SettlementRejected")

        // One transaction wrote every wallet's entries and records.
        const entries = (yield* Effect.all([c, d, e].map(entriesOf))).flat()
        const batchEntries = entries.filter((entry) =>
          ["c-1", "c-2", "d-1"].includes(entry.session_id ?? "") ||
          (entry.session_id === "known" && entry.kind === "spend")
        )
        expect(batchEntries).toHaveLength(4)
        const tx = batchEntries[0]?.tx
        expect(batchEntries.every((entry) => entry.tx === tx)).toBe(true)
        const records = (yield* Effect.all([c, d, e].map(recordsOf))).flat()
        const keys = new Set(
          jobs.filter((job) => job.payload.account_id !== unknown.id && job.payload.session_id !== "ghost")
            .map((job) => job.payload.idempotency_key)
        )
        expect(records.filter((r) => keys.has(r.idempotency_key)).map((r) => r.tx)).toEqual(Array(keys.size).fill(tx))
        // Each wallet was settled on its own: its sequences go on, its balances are its own.
        expect(yield* walletRow(c)).toMatchObject({ reserved_usd: "3.000000", last_sequence: "3" })
        expect(yield* walletRow(d)).toMatchObject({ reserved_usd: "2.000000", last_sequence: "2" })
        expect(yield* walletRow(e)).toMatchObject({
          reserved_usd: "1.000000",
          spent_usd: "3.000000",
          last_sequence: "3"
        })
      }))

    it.effect("that fails to commit is retried split: the innocent jobs apply, only the culprit is deferred (D8)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* newAccount("50")
        succeeded(yield* apply(reserve(account, "known", "5")))
        const before = yield* walletRow(account)
        const entriesBefore = yield* entriesOf(account)
        // The database refuses the commit of any transaction that records a key of a doomed session:
        // everything else in that transaction was accepted statement by statement.
        yield* sql.unsafe(`
          CREATE FUNCTION refuse_doomed_commit() RETURNS trigger AS $$
          BEGIN
            IF NEW.session_id LIKE 'doomed-%' THEN RAISE EXCEPTION 'commit refused for %', NEW.idempotency_key; END IF;
            RETURN NULL;
          END $$ LANGUAGE plpgsql`)
        yield* sql.unsafe(`
          CREATE CONSTRAINT TRIGGER refuse_doomed_commit AFTER INSERT ON settlement_records
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_doomed_commit()`)
        const dropTrigger = Effect.zipRight(
          sql.unsafe("DROP TRIGGER IF EXISTS refuse_doomed_commit ON settlement_records"),
          sql.unsafe("DROP FUNCTION IF EXISTS refuse_doomed_commit()")
        ).pipe(Effect.orDie)

        const jobs = [
          reserve(account, "a", "3"),
          spend(account, "known", "2"),
          reserve(account, "doomed-1", "1"),
          reserve(account, "too-big", "100"),
          release(account, "known")
        ]
        const { first, results } = yield* inOneBatch(account, jobs).pipe(Effect.ensuring(dropTrigger))
        expect(succeeded(first).status).toBe("applied")
        expect(deferredReason(results[2])).toBe("the wallet could not be settled now")
        const innocent = [0, 1, 3, 4]
        expect(innocent.map((i) => succeeded(results[i]).status)).toEqual([
          "applied",
          "applied",
          "insufficient_funds",
          "applied"
        ])
        // Nothing of the culprit was written: no entry, no record, no session.
        const doomedKey = jobs[2]?.payload.idempotency_key
        expect((yield* recordsOf(account)).map((r) => r.idempotency_key)).not.toContain(doomedKey)
        expect((yield* sessionsOf(account)).map((s) => s.session_id).sort()).toEqual([
          "a",
          "first-in-line",
          "known",
          "too-big"
        ])
        expect((yield* entriesOf(account)).map((entry) => entry.session_id)).not.toContain("doomed-1")
        expect(yield* walletRow(account)).toMatchObject({ reserved_usd: "3.000001" })

        // A retry (as BullMQ's) applies the culprit once; the others answer duplicates with the same entries.
        const retried = yield* Effect.all(jobs.map(apply), { concurrency: "unbounded" })
        expect(retried.map((outcome) => succeeded(outcome).status)).toEqual([
          "duplicate",
          "duplicate",
          "applied",
          "duplicate",
          "duplicate"
        ])
        for (const i of innocent) {
          expect(succeeded(retried[i])).toMatchObject({ entry_ids: succeeded(results[i]).entry_ids })
        }
        const after = yield* entriesOf(account)
        expect(after.map((entry) => Number(entry.sequence))).toEqual(
          Array.from({ length: after.length }, (_, i) => i + 1)
        )
        expect(after).toHaveLength(entriesBefore.length + 1 + 4)
        expect(before.reserved_usd).toBe("5.000000")
        const keys = new Set(jobs.map((job) => job.payload.idempotency_key))
        expect((yield* recordsOf(account)).filter((r) => keys.has(r.idempotency_key))).toHaveLength(5)
      }))

    it.effect("writes its rows at its transaction's time, and its events show them as written (D12, D17)", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        // A session opened, charged and closed by one batch: its event is built before the batch writes it.
        const { results } = yield* inOneBatch(account, [
          reserve(account, "born-and-closed", "2"),
          spend(account, "born-and-closed", "0.5"),
          release(account, "born-and-closed")
        ])
        expect(results.map((outcome) => succeeded(outcome).status)).toEqual(["applied", "applied", "applied"])
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{
          readonly created_at: Date
          readonly updated_at: Date
          readonly wallet_updated_at: Date
          readonly entry_times: ReadonlyArray<Date>
          readonly tx_entries: string
          readonly session: Record<string, unknown> | null
        }>`SELECT s.created_at, s.updated_at, w.updated_at AS wallet_updated_at,
                  array(SELECT e.created_at FROM ledger_entries e
                        WHERE e.wallet_id = w.id AND e.session_id = s.session_id) AS entry_times,
                  (SELECT count(DISTINCT e.xmin::text) FROM ledger_entries e
                   WHERE e.wallet_id = w.id AND e.session_id = s.session_id)::text AS tx_entries,
                  (SELECT v.data -> 'session' FROM account_events v
                   WHERE v.account_id = w.account_id AND v.type = 'session.closed') AS session
           FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
           WHERE w.account_id = ${account.id} AND s.session_id = 'born-and-closed'`.pipe(Effect.orDie)
        expect(row?.tx_entries).toBe("1")
        const time = row?.created_at.toISOString()
        expect(row?.updated_at.toISOString()).toBe(time)
        expect(row?.wallet_updated_at.toISOString()).toBe(time)
        expect(row?.entry_times.map((at) => at.toISOString())).toEqual([time, time, time])
        expect(row?.session).toMatchObject({
          session_id: "born-and-closed",
          state: "closed",
          closed_reason: "released",
          reserved_usd: "0.000000",
          spent_usd: "0.500000",
          opened_at: time,
          last_activity_at: time
        })
      }))
  })
})
