import { Queue, QueueEvents } from "bullmq"
import { ConfigProvider, DateTime, Effect, Layer, ManagedRuntime } from "effect"
import { Redis } from "ioredis"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { createInterface } from "node:readline"
import { setTimeout as sleep } from "node:timers/promises"
import type pg from "pg"
import { ROOT } from "../../scripts/programs.mjs"
import { Accounts } from "../../src/Accounts.js"
import { AppConfig } from "../../src/Config.js"
import { Account } from "../../src/Domain/Account.js"
import type { Threshold } from "../../src/Domain/Events.js"
import type { GrantCategory } from "../../src/Domain/Grants.js"
import * as Money from "../../src/Domain/Money.js"
import { Events } from "../../src/Events.js"
import { EventsRepo } from "../../src/Events/Repo.js"
import {
  jobIdOf,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_KINDS,
  SETTLEMENT_QUEUE,
  type SettlementKind
} from "../../src/Settlement/Jobs.js"
import { MigrationsLive, SqlLive } from "../../src/Sql.js"
import { Wallets } from "../../src/Wallets.js"
import { Webhooks } from "../../src/Webhooks.js"
import { CYCLE, openCeiling } from "../ceiling/movements.js"
import { readCpuSeconds, readPostgresCpuSeconds } from "../lib/child.js"
import {
  compareRounds,
  figuresOf,
  pairedRatio,
  pairedRatioOf,
  type RoundFigures,
  type Runner,
  stackCpuUsPerRequest
} from "../lib/load.js"
import { endQuietly, openClient } from "../lib/pg.js"
import { enableStatistics, planningShare, statementTimes, walPosition, writesBetween } from "../lib/pgstats.js"
import { percentile } from "../lib/stats.js"
import { redisUrl } from "../lib/stores.js"
import type { Bench, Row, Suite, SuiteResult } from "../lib/suite.js"
import type { WorkerProcess } from "../lib/worker.js"

/**
 * Settlement throughput and latency: session runners each running
 * reserve → spend → release cycles through the queue and the real worker
 * process, on one hot wallet and spread over 100, against the pg ceiling
 * (bench/ceiling/movements.ts: one transaction per movement) at the same
 * concurrency, round by round. After each scenario the books are checked:
 * a fast benchmark that is wrong is worthless.
 */

/** Session runners at once, each with one job in flight; the ceiling opens as many connections. */
const CONCURRENCY = 32
/**
 * Cycles per round for each second of `--duration`: a round lasts about that long at the ceiling's
 * speed, two to three times longer through the worker. (With the features on, the whole run must
 * stay within its ten minutes on a machine whose system calls are slow.)
 */
const CYCLES_PER_SECOND_OF_DURATION = 320
/**
 * The events comparison's rounds are a share of that: all its sides run through the worker, so
 * each of its rounds lasts as long as a worker round of the scenarios.
 */
const EVENT_ROUND_SHARE = 0.5
const WARM_UP_CYCLES = 300
const BUDGET = "1000000"
const JOBS_PER_CYCLE = 3
const RESULT_TIMEOUT_MS = 60_000

interface Scenario {
  /** Names its ratio: `settlement_<key>_vs_ceiling`. */
  readonly key: string
  readonly wallets: number
  readonly label: string
}

const scenarios: ReadonlyArray<Scenario> = [
  { key: "hot", wallets: 1, label: "reserve+spend+release, 1 hot wallet" },
  { key: "spread", wallets: 100, label: "reserve+spend+release, 100 wallets" }
]

/**
 * The services that arrange the accounts, as an operator would; webhook endpoints on the worker's
 * Redis prefix, where a redelivery would queue, and loopback http URLs allowed as the webhooks
 * process allows them.
 */
const configOf = (databaseUrl: string, redisPrefix: string) =>
  AppConfig.Default.pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([
        ["DATABASE_URL", databaseUrl],
        ["REDIS_URL", redisUrl()],
        ["REDIS_PREFIX", redisPrefix],
        ["SETTLEMENT_QUEUE_PREFIX", redisPrefix],
        ["WEBHOOK_ALLOW_INSECURE", "true"]
      ])
    )))
  )
const makeRuntime = (databaseUrl: string, redisPrefix: string) =>
  ManagedRuntime.make(
    Layer.mergeAll(
      Accounts.Default,
      Wallets.Default,
      Events.Default,
      EventsRepo.Default,
      Webhooks.Default
    ).pipe(
      Layer.provide(SqlLive),
      Layer.provide(configOf(databaseUrl, redisPrefix))
    )
  )

/** Brings a new database to the migrations' schema, as the API does when it starts. */
const migrate = async (databaseUrl: string) => {
  const runtime = ManagedRuntime.make(MigrationsLive.pipe(Layer.provide(configOf(databaseUrl, "bench-migrate"))))
  try {
    await runtime.runPromise(Effect.void)
  } finally {
    await runtime.dispose()
  }
}
type BenchRuntime = ReturnType<typeof makeRuntime>

/** Organisations with enforced wallets and a budget no run exhausts; their wallet ids. */
const createAccounts = (runtime: BenchRuntime, name: string, count: number) =>
  runtime.runPromise(Effect.gen(function*() {
    const accounts = yield* Accounts
    const wallets = yield* Wallets
    return yield* Effect.forEach(Array.from({ length: count }, (_, index) => index), (index) =>
      Effect.gen(function*() {
        const { id } = yield* accounts.createOrganisation(`bench ${name} ${index}`)
        const account = new Account({ kind: "client", id })
        const wallet = yield* wallets.setBudget(account, { budget_usd: Money.decimal(BUDGET) })
        return { account, walletId: wallet.id }
      }).pipe(Effect.orDie))
  }))

interface CycleRun {
  readonly jobsPerSecond: number
  readonly latencies: Array<number>
  /** Cycles run: cycles 0 … n-1, each on `accounts[i % accounts.length]`. */
  readonly cycles: number
}

/**
 * How long a round runs: runners take no new cycle after `seconds` (the one in flight finishes),
 * and none beyond `cycles`. Bound by time, a round lasts as long on a slow machine as on a fast
 * one, and the run's length follows its settings, not the machine's speed.
 */
interface RoundSize {
  readonly cycles: number
  readonly seconds?: number
}

type Payload = {
  readonly account_id: string
  readonly session_id: string
  readonly idempotency_key: string
  readonly amount_usd?: string
  readonly repository_id?: string
  readonly labels?: Readonly<Record<string, string>>
  readonly model?: string
}

/** What every reserve and every spend of a run carries beside its cycle's own fields: D19's labels and model. */
interface CycleFields {
  readonly reserve?: { readonly labels: Readonly<Record<string, string>> }
  readonly spend?: { readonly model: string }
}

/**
 * A session runner's producer, written as D8 tells raw BullMQ producers to
 * write one: the queue's job names and payloads, the job options and the job
 * id the typed producer sets. Raw rather than the typed producer because the
 * producer shares this machine's two cores with the worker: the typed one
 * costs this process about three times the CPU per job (an Effect run, the
 * payload's validation and the result's decoding), which the worker would be
 * measured without.
 */
const openProducer = async (redisPrefix: string) => {
  const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null })
  const queue = new Queue(SETTLEMENT_QUEUE, { connection, prefix: redisPrefix })
  // Every result wait listens for the queue's "closing".
  queue.setMaxListeners(0)
  const events = new QueueEvents(SETTLEMENT_QUEUE, { connection, prefix: redisPrefix })
  await events.waitUntilReady()
  /** Enqueues a job and waits for its result (what the worker returned). */
  const settle = async (kind: SettlementKind, payload: Payload): Promise<unknown> => {
    const job = await queue.add(kind, payload, {
      ...SETTLEMENT_JOB_OPTIONS,
      jobId: jobIdOf(payload.account_id, payload.idempotency_key),
      // As the typed producer: results readable for a day, failures for a month.
      removeOnComplete: { age: 86_400 },
      removeOnFail: { age: 30 * 86_400 }
    })
    const result: unknown = await job.waitUntilFinished(events, RESULT_TIMEOUT_MS)
    return result
  }
  const close = async () => {
    await events.close()
    await queue.close()
    connection.disconnect()
  }
  return { settle, close } as const
}
type Producer = Awaited<ReturnType<typeof openProducer>>

/** `applied`, and for a spend nothing beyond the hold. */
const isApplied = (result: unknown): boolean =>
  typeof result === "object" && result !== null && "status" in result && result.status === "applied" &&
  (!("unfunded_usd" in result) || result.unfunded_usd === Money.format(Money.zero))

/**
 * `cycles` cycles, `CONCURRENCY` at a time: each runner enqueues a job, waits
 * for its result (enqueue → result is the job's latency), then enqueues the
 * next. Cycle `i` runs on `accounts[i % n]`. Any outcome but `applied` fails
 * the round.
 */
const runWorkerCycles = async (
  producer: Producer,
  accountIds: ReadonlyArray<string>,
  size: number | RoundSize,
  label: string,
  /** The repository a session of the account is attributed to (D16), if any. */
  repositoryOf: ReadonlyMap<string, string> = new Map(),
  fields: CycleFields = {},
  /** The user a session of the account is attributed to (D16), if any. */
  userOf: ReadonlyMap<string, string> = new Map()
): Promise<CycleRun> => {
  const { cycles, seconds } = typeof size === "number" ? { cycles: size, seconds: undefined } : size
  const latencies: Array<number> = []
  let next = 0
  const started = performance.now()
  const deadline = seconds === undefined ? Number.POSITIVE_INFINITY : started + seconds * 1000
  const take = () => (performance.now() < deadline && next < cycles ? next++ : cycles)
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let cycle = take(); cycle < cycles; cycle = take()) {
      const account_id = accountIds[cycle % accountIds.length]
      if (account_id === undefined) throw new Error("no accounts")
      const session_id = `${label}-${cycle}`
      const repository_id = repositoryOf.get(account_id)
      const user_id = userOf.get(account_id)
      const steps: ReadonlyArray<readonly [SettlementKind, Payload]> = [
        ["reserve", {
          account_id,
          session_id,
          amount_usd: Money.format(CYCLE.reserve),
          idempotency_key: randomUUID(),
          ...(repository_id === undefined ? {} : { repository_id }),
          ...(user_id === undefined ? {} : { user_id }),
          ...fields.reserve
        }],
        ["spend", {
          account_id,
          session_id,
          amount_usd: Money.format(CYCLE.spend),
          idempotency_key: randomUUID(),
          ...fields.spend
        }],
        ["release", { account_id, session_id, idempotency_key: randomUUID() }]
      ]
      for (const [kind, payload] of steps) {
        const begun = performance.now()
        const result = await producer.settle(kind, payload)
        latencies.push(performance.now() - begun)
        if (!isApplied(result)) {
          throw new Error(`${session_id} ${kind}: expected applied, got ${JSON.stringify(result)}`)
        }
      }
    }
  }))
  const elapsed = (performance.now() - started) / 1000
  return { jobsPerSecond: latencies.length / elapsed, latencies, cycles: Math.min(next, cycles) }
}

const figures = (
  perSecond: number,
  latencies: Array<number>,
  cpuUsPerJob?: number,
  webhooksCpuUsPerDelivery?: number,
  postgresCpuUsPerJob?: number
): RoundFigures => ({
  rps: perSecond,
  p50_ms: percentile(latencies, 0.5),
  p99_ms: percentile(latencies, 0.99),
  requests: latencies.length,
  ...(cpuUsPerJob === undefined ? {} : { cpu_us_per_request: cpuUsPerJob }),
  ...(webhooksCpuUsPerDelivery === undefined ? {} : { webhooks_cpu_us_per_delivery: webhooksCpuUsPerDelivery }),
  ...(postgresCpuUsPerJob === undefined ? {} : { postgres_cpu_us_per_request: postgresCpuUsPerJob })
})

/**
 * A round's size: `share` of `--duration` seconds, and at most four times the cycles a round at
 * the ceiling's speed on an earlier machine took in that time (`CYCLES_PER_SECOND_OF_DURATION`).
 */
const roundSize = (settings: Bench["settings"], share: number): Required<RoundSize> => ({
  seconds: settings.durationSeconds * share,
  cycles: Math.max(WARM_UP_CYCLES, Math.round(4 * CYCLES_PER_SECOND_OF_DURATION * share * settings.durationSeconds))
})

/**
 * A warm-up: `WARM_UP_CYCLES`, or fewer when they take longer than the run's warm-up seconds
 * (a loaded machine), so that a warm-up's length, too, follows the settings.
 */
const warmUpSize = (settings: Bench["settings"]): Required<RoundSize> => ({
  cycles: WARM_UP_CYCLES,
  seconds: settings.warmUpSeconds
})

/**
 * What the database says of a round, from now until the function it answers is called with the
 * jobs done: planning's share of the statements' time and the rows and index entries written per
 * job (`bench/lib/pgstats.ts`); read after the round's CPU figures, which it would add to.
 */
const databaseFiguresFrom = async (client: pg.Client) => {
  const timesBefore = await statementTimes(client)
  const walBefore = await walPosition(client)
  return async (jobs: number): Promise<Partial<RoundFigures>> => {
    const walAfter = await walPosition(client)
    const share = planningShare(timesBefore, await statementTimes(client))
    const writes = jobs === 0 ? undefined : await writesBetween(client, walBefore, walAfter)
    return {
      ...(share === undefined ? {} : { planning_share: share }),
      ...(writes === undefined ? {} : {
        rows_written_per_job: writes.rows / jobs,
        index_entries_per_job: writes.indexEntries / jobs
      })
    }
  }
}

/** `pairedRatio` over the rounds both have so far; undefined before either has one. */
const pairedSoFar = (
  subject: ReadonlyArray<RoundFigures>,
  reference: ReadonlyArray<RoundFigures>,
  metric: "rps" | "p99_ms" | "cpu_us_per_request" | "postgres_cpu_us_per_request"
) => {
  const n = Math.min(subject.length, reference.length)
  if (n === 0) return undefined
  try {
    return pairedRatioOf(subject.slice(0, n), reference.slice(0, n), metric, (figures) => figures[metric])
  } catch {
    return undefined
  }
}

/**
 * Rows of the rounds so far, one a runner, with each one's jobs/s and p99 against `reference`'s:
 * what a part whose final rows wait for its books' checks keeps after every round.
 */
const roundsSoFar =
  (reference: string, request: string) => (rounds: ReadonlyMap<string, ReadonlyArray<RoundFigures>>): SuiteResult => ({
    rows: [...rounds].filter(([, of]) => of.length > 0).map(([server, of]): Row => {
      const ofReference = rounds.get(reference) ?? []
      const rps = server === reference ? undefined : pairedSoFar(of, ofReference, "rps")
      const p99 = server === reference ? undefined : pairedSoFar(of, ofReference, "p99_ms")
      return {
        suite: "settlement",
        request,
        server,
        connections: CONCURRENCY,
        ...figuresOf(of),
        ...(rps === undefined || p99 === undefined ? {} : { vs: { reference, rps, p99 } }),
        parameters: { rounds_so_far: of.length },
        rounds: of
      }
    }),
    ratios: {}
  })

/**
 * An `onRound` that collects each runner's rounds and keeps the part's rows and ratios of the
 * rounds so far (`build`) after every round, then tells `then`.
 */
const keepEachRound = (
  bench: Bench,
  part: string,
  build: (rounds: ReadonlyMap<string, ReadonlyArray<RoundFigures>>) => SuiteResult,
  then: (name: string, round: number, figures: RoundFigures) => void
) => {
  const rounds = new Map<string, Array<RoundFigures>>()
  return (name: string, round: number, figures: RoundFigures) => {
    const ofRunner = rounds.get(name) ?? []
    ofRunner.push(figures)
    rounds.set(name, ofRunner)
    bench.kept.add(build(rounds), part)
    then(name, round, figures)
  }
}

/**
 * The database server's CPU per job (every PostgreSQL process of the machine, the runners'
 * connections included) from now until the function it answers is called with the jobs done:
 * what a contender costs the database beside what it costs itself. The bench runs alone.
 */
const postgresCpuFrom = () => {
  const before = readPostgresCpuSeconds()
  return (jobs: number) => {
    const after = readPostgresCpuSeconds()
    return before === undefined || after === undefined || jobs === 0 ? undefined : ((after - before) * 1e6) / jobs
  }
}

/**
 * The webhooks process's CPU per delivery from now until the function it answers is called, as
 * the worker's CPU per job is read (`cpuSeconds`, user + system); every delivery the receiver got
 * meanwhile counts, a retry too. Undefined when there was none, or the CPU time cannot be read.
 */
const webhooksCpuFrom = (webhooks: WorkerProcess, receiver: Receiver) => {
  const cpuBefore = webhooks.cpuSeconds()
  const deliveriesBefore = receiver.deliveries()
  return (): number | undefined => {
    const cpuAfter = webhooks.cpuSeconds()
    const deliveries = receiver.deliveries() - deliveriesBefore
    return cpuBefore === undefined || cpuAfter === undefined || deliveries === 0
      ? undefined
      : ((cpuAfter - cpuBefore) * 1e6) / deliveries
  }
}

/**
 * The wallets the workers read and decided again (`account_api_settlement_wallet_conflicts_total`),
 * as their published totals hold them under `prefix`: each worker adds its counts every five
 * seconds and when it stops.
 */
const conflictsSoFar = async (prefix: string): Promise<number> => {
  const connection = new Redis(redisUrl())
  try {
    const totals = await connection.hgetall(`${prefix}:metrics:settlement-totals`)
    return Object.entries(totals)
      .filter(([series]) => series.startsWith("account_api_settlement_wallet_conflicts_total"))
      .reduce((sum, [, value]) => sum + Number(value), 0)
  } finally {
    connection.disconnect()
  }
}

/** How long a worker may take to publish what it counted (its interval is five seconds). */
const PUBLISH_WAIT_MS = 5_500

/** A round's progress line: its rate, latencies and what each process's CPU cost. */
const roundLine = (f: RoundFigures) =>
  `${f.rps.toFixed(0)} jobs/s, p50 ${f.p50_ms.toFixed(1)} ms, p99 ${f.p99_ms.toFixed(1)} ms` +
  (f.cpu_us_per_request === undefined ? "" : `, ${f.cpu_us_per_request.toFixed(0)} worker CPU µs/job`) +
  (f.webhooks_cpu_us_per_delivery === undefined
    ? ""
    : `, ${f.webhooks_cpu_us_per_delivery.toFixed(0)} webhooks CPU µs/delivery`) +
  (f.postgres_cpu_us_per_request === undefined
    ? ""
    : `, ${f.postgres_cpu_us_per_request.toFixed(0)} postgres CPU µs/job`) +
  (f.planning_share === undefined ? "" : `, planning ${(f.planning_share * 100).toFixed(1)}% of statement time`) +
  (f.rows_written_per_job === undefined || f.index_entries_per_job === undefined
    ? ""
    : `, ${f.rows_written_per_job.toFixed(1)} rows / ${f.index_entries_per_job.toFixed(1)} index entries a job`) +
  (f.wallet_rereads_per_job === undefined ? "" : `, ${f.wallet_rereads_per_job.toFixed(3)} re-reads a job`)

interface WalletCheck {
  readonly id: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly last_sequence: string
  readonly entries: string
  readonly first: string | null
  readonly last: string | null
}

/**
 * The books after a scenario: every wallet's ledger has exactly the entries
 * its cycles booked (one budget_set, then three per cycle), with sequences
 * 1…n and the wallet's last_sequence at n; nothing is left reserved; spent is
 * exactly what the cycles spent, so nothing was applied twice or lost.
 */
const checkWallets = async (
  client: pg.Client,
  cyclesByWallet: ReadonlyMap<string, number>,
  who: string,
  /** The entries each wallet had before its cycles: its budget, and its grants' credits (D21). */
  setUpEntries = 1
) => {
  const { rows } = await client.query<WalletCheck>(
    `SELECT w.id, w.reserved_usd::text, w.spent_usd::text, w.last_sequence::text,
            count(e.id)::text AS entries, min(e.sequence)::text AS first, max(e.sequence)::text AS last
     FROM wallets w LEFT JOIN ledger_entries e ON e.wallet_id = w.id
     WHERE w.id = ANY($1::uuid[]) GROUP BY w.id`,
    [[...cyclesByWallet.keys()]]
  )
  if (rows.length !== cyclesByWallet.size) {
    throw new Error(`${who}: ${rows.length} of ${cyclesByWallet.size} wallets found`)
  }
  for (const row of rows) {
    const cycles = cyclesByWallet.get(row.id) ?? 0
    const entries = setUpEntries + JOBS_PER_CYCLE * cycles
    const problems = [
      Number(row.entries) === entries ? "" : `${row.entries} entries, expected ${entries}`,
      row.first === "1" && Number(row.last) === entries && row.last_sequence === row.last
        ? ""
        : `sequences ${row.first}…${row.last} with last_sequence ${row.last_sequence}`,
      Money.decimal(row.reserved_usd).isZero() ? "" : `reserved ${row.reserved_usd} after every release`,
      Money.decimal(row.spent_usd).eq(CYCLE.spend.times(cycles))
        ? ""
        : `spent ${row.spent_usd}, expected ${Money.format(CYCLE.spend.times(cycles))}`
    ].filter((problem) => problem !== "")
    if (problems.length > 0) throw new Error(`${who} wallet ${row.id}: ${problems.join("; ")}`)
  }
}

/** The service's own records: one applied record per job, every session released with nothing held. */
const checkSettlement = async (client: pg.Client, cyclesByWallet: ReadonlyMap<string, number>) => {
  const walletIds = [...cyclesByWallet.keys()]
  const cycles = [...cyclesByWallet.values()].reduce((sum, n) => sum + n, 0)
  const { rows } = await client.query<
    { readonly records: string; readonly not_applied: string; readonly sessions: string; readonly open: string }
  >(
    `SELECT (SELECT count(*) FROM settlement_records WHERE wallet_id = ANY($1::uuid[]))::text AS records,
            (SELECT count(*) FROM settlement_records WHERE wallet_id = ANY($1::uuid[]) AND outcome <> 'applied')::text AS not_applied,
            (SELECT count(*) FROM settlement_sessions WHERE wallet_id = ANY($1::uuid[]))::text AS sessions,
            (SELECT count(*) FROM settlement_sessions
             WHERE wallet_id = ANY($1::uuid[]) AND (state <> 'released' OR held_usd <> 0))::text AS open`,
    [walletIds]
  )
  const row = rows[0]
  if (
    row === undefined || Number(row.records) !== JOBS_PER_CYCLE * cycles || row.not_applied !== "0" ||
    Number(row.sessions) !== cycles || row.open !== "0"
  ) {
    throw new Error(
      `settlement records: ${JSON.stringify(row)}, expected ${
        JOBS_PER_CYCLE * cycles
      } applied records and ${cycles} released sessions`
    )
  }
}

/**
 * No job failed, none is waiting for a retry, none is left behind. (The
 * expiry sweep's scheduler keeps its next run delayed; that one is not a retry.)
 */
const checkQueue = async (redisPrefix: string) => {
  const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null })
  const queue = new Queue(SETTLEMENT_QUEUE, { connection, prefix: redisPrefix })
  try {
    const counts = await queue.getJobCounts("failed", "waiting", "active", "prioritized")
    const kinds: ReadonlyArray<string> = SETTLEMENT_KINDS
    const retrying = (await queue.getDelayed()).filter((job) => kinds.includes(job.name)).length
    if (retrying > 0 || Object.values(counts).some((count) => count !== 0)) {
      throw new Error(`settlement queue not clean: ${JSON.stringify({ ...counts, retrying })}`)
    }
  } finally {
    await queue.close()
    connection.disconnect()
  }
}

/**
 * The governance was in force: every spend of the served accounts was attributed to its account's
 * repository, in the running totals the limits are judged by (D16).
 */
const checkGoverned = async (
  client: pg.Client,
  accounts: ReadonlyArray<Account>,
  repositoryOf: ReadonlyMap<string, string>
) => {
  const { rows } = await client.query<{ readonly account_id: string; readonly repository_id: string | null }>(
    `SELECT DISTINCT w.account_id::text, t.repository_id::text
     FROM settlement_spend_totals t JOIN wallets w ON w.id = t.wallet_id
     WHERE w.account_id = ANY($1::uuid[])`,
    [accounts.map((account) => account.id)]
  )
  const stray = rows.filter((row) => row.repository_id !== repositoryOf.get(row.account_id))
  if (rows.length === 0 || stray.length > 0) {
    throw new Error(`governed spends not attributed to their repository: ${JSON.stringify(stray.slice(0, 3))}`)
  }
}

/** Jobs per transaction: the entries written by one transaction carry its id in `xmin`. */
const jobsPerTransaction = async (client: pg.Client, walletIds: ReadonlyArray<string>): Promise<number> => {
  const { rows } = await client.query<{ readonly ratio: string }>(
    `SELECT (count(*)::float8 / count(DISTINCT xmin::text))::text AS ratio
     FROM ledger_entries WHERE wallet_id = ANY($1::uuid[]) AND kind NOT IN ('budget_set', 'credit_added')`,
    [walletIds]
  )
  return Number(rows[0]?.ratio)
}

const countCycles = (counts: Map<string, number>, walletIds: ReadonlyArray<string>, cycles: number) => {
  for (let cycle = 0; cycle < cycles; cycle++) {
    const id = walletIds[cycle % walletIds.length]
    if (id !== undefined) counts.set(id, (counts.get(id) ?? 0) + 1)
  }
}

/** Limits far above what a run spends: checked on every reserve, never reached. */
const GOVERNING_LIMIT = Money.decimal("100000000")
/** An alert threshold far below what a wallet has: read and judged on every movement, never crossed. */
const GOVERNING_THRESHOLD = Money.decimal("1")

/** A limit as `PUT /developer/account/limits` leaves it (D16, D19). */
interface LimitRow {
  readonly scope: "account" | "repository" | "label" | "each_user"
  readonly scope_id: string | null
  readonly period: "day" | "rolling" | "concurrent"
  /** A rolling limit's window (D22); none for the others. */
  readonly window_minutes?: number
  readonly amount_usd: string | null
  readonly max_open_sessions: number | null
  readonly warn_at_percent: ReadonlyArray<number>
}

/** A day limit far above what a run spends, with warnings at `warn_at_percent` if any. */
const dayLimit = (
  scope: LimitRow["scope"],
  scope_id: string | null,
  warn_at_percent: ReadonlyArray<number> = []
): LimitRow => ({
  scope,
  scope_id,
  period: "day",
  amount_usd: Money.format(GOVERNING_LIMIT),
  max_open_sessions: null,
  warn_at_percent
})

/** The served accounts' limits (D16): a day limit on the account and one on its repository. */
const governingLimits = (repositoryId: string): ReadonlyArray<LimitRow> => [
  dayLimit("account", null),
  dayLimit("repository", repositoryId)
]

/**
 * Saves each account's list as `PUT /developer/account/limits` leaves it (a set at version 1 and
 * its limits; the accounts are new), in one statement as the fleet tests save theirs
 * (`test/support/spendControls.ts`): what is measured is the batch's enforcement, not the write.
 */
const saveLimits = async (
  client: pg.Client,
  lists: ReadonlyArray<{ readonly account: Account; readonly limits: ReadonlyArray<LimitRow> }>
) => {
  const rows = lists.flatMap(({ account, limits }) =>
    limits.map((limit) => ({ account_kind: account.kind, account_id: account.id, ...limit }))
  )
  await client.query(
    `WITH input AS (
       SELECT * FROM json_to_recordset($1::json) AS i (account_kind account_kind, account_id uuid, scope text,
         scope_id text, period text, window_minutes integer, amount_usd numeric, max_open_sessions integer,
         warn_at_percent smallint[])
     ),
     sets AS (
       INSERT INTO spend_limit_sets (account_kind, account_id, version)
       SELECT DISTINCT account_kind, account_id, 1 FROM input
     )
     INSERT INTO spend_limits (account_kind, account_id, scope, scope_id, period, window_minutes, amount_usd,
       max_open_sessions, warn_at_percent)
     SELECT account_kind, account_id, scope, scope_id, period, window_minutes, amount_usd, max_open_sessions,
       warn_at_percent
     FROM input`,
    [JSON.stringify(rows)]
  )
}

/** A repository for each account, its sessions' attribution (D16): account id → repository id. */
const createRepositories = (runtime: BenchRuntime, accounts: ReadonlyArray<Account>) =>
  runtime.runPromise(Effect.gen(function*() {
    const directory = yield* Accounts
    const repositories = yield* Effect.forEach(accounts, (account) =>
      Effect.map(
        Effect.orDie(directory.createRepository(account.id, "bench")),
        ({ id }) => [account.id, id] as const
      ), { concurrency: 8 })
    return new Map(repositories)
  }))

/**
 * Switches on for the accounts what issue 29's targets are measured with (D16, D17): a
 * repository their sessions are attributed to, a day limit on the account and one on that
 * repository, an alert threshold and a webhook endpoint at `url`. Answers each account's
 * repository.
 */
const govern = async (runtime: BenchRuntime, client: pg.Client, accounts: ReadonlyArray<Account>, url: string) => {
  const repositoryOf = await createRepositories(runtime, accounts)
  await saveLimits(
    client,
    accounts.map((account) => ({ account, limits: governingLimits(repositoryOf.get(account.id) ?? "") }))
  )
  await runtime.runPromise(Effect.gen(function*() {
    const events = yield* Events
    const webhooks = yield* Webhooks
    yield* Effect.forEach(accounts, (account) =>
      Effect.gen(function*() {
        const alerts = yield* events.getAlerts(account)
        yield* events.replaceAlerts(account, [{ amount_usd: GOVERNING_THRESHOLD }], alerts.version)
        yield* webhooks.create(account, { url })
      }).pipe(Effect.orDie), { concurrency: 8 })
  }))
  return repositoryOf
}

const measureScenario = async (
  bench: Bench,
  runtime: BenchRuntime,
  producer: Producer,
  noopProducer: Producer,
  ceiling: Awaited<ReturnType<typeof openCeiling>>,
  client: pg.Client,
  receiver: Receiver,
  webhooks: WorkerProcess,
  scenario: Scenario
): Promise<SuiteResult> => {
  const { noopWorker, progress, settings, worker } = bench
  const size = roundSize(settings, 1)
  const served = await createAccounts(runtime, `${scenario.key} served`, scenario.wallets)
  const own = await createAccounts(runtime, `${scenario.key} ceiling`, scenario.wallets)
  const path = `/governed-${scenario.key}`
  const governed = served.map((s) => s.account)
  const repositoryOf = await govern(runtime, client, governed, receiver.url(path))
  const loggedBefore = await countEvents(client, governed)
  /** Waits until every event the served accounts logged has arrived; how long that took, in seconds. */
  const drain = async () => {
    const begun = performance.now()
    await receiver.waitFor(path, (await countEvents(client, governed)) - loggedBefore, DELIVERY_TIMEOUT_MS)
    return (performance.now() - begun) / 1000
  }
  const servedAccounts = served.map((s) => s.account.id)
  const servedWallets = served.map((s) => s.walletId)
  const ownWallets = own.map((s) => s.walletId)
  const servedCycles = new Map(servedWallets.map((id) => [id, 0]))
  const ownCycles = new Map(ownWallets.map((id) => [id, 0]))

  let round = 0
  const workerRunner: Runner = {
    name: "worker",
    round: async () => {
      const label = `${scenario.key}-r${++round}`
      const cpuBefore = worker.cpuSeconds()
      const webhooksCpu = webhooksCpuFrom(webhooks, receiver)
      const postgresCpu = postgresCpuFrom()
      const database = await databaseFiguresFrom(client)
      const run = await runWorkerCycles(producer, servedAccounts, size, label, repositoryOf)
      // The round lasts until its events are delivered: delivery left for later would flatter it.
      const seconds = run.latencies.length / run.jobsPerSecond + (await drain())
      const cpuAfter = worker.cpuSeconds()
      countCycles(servedCycles, servedWallets, run.cycles)
      const measured = figures(
        run.latencies.length / seconds,
        run.latencies,
        cpuBefore === undefined || cpuAfter === undefined
          ? undefined
          : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length,
        webhooksCpu(),
        postgresCpu(run.latencies.length)
      )
      return { ...measured, ...(await database(run.latencies.length)) }
    }
  }
  /**
   * Two workers on the one queue (D14), the second started for the round and stopped after it:
   * on one hot wallet their batches race for it, and the loser of each race reads and decides
   * again. Its CPU is both workers', per job; the wallets read again per job are a figure of the
   * round (`account_api_settlement_wallet_conflicts_total`, both workers' totals).
   */
  let pairRound = 0
  const pairRunner: Runner = {
    name: "2 workers",
    round: async () => {
      const second = await bench.startSecondWorker()
      try {
        const conflictsBefore = await conflictsSoFar(worker.redisPrefix)
        const cpuBefore = (worker.cpuSeconds() ?? NaN) + (second.cpuSeconds() ?? NaN)
        const postgresCpu = postgresCpuFrom()
        const database = await databaseFiguresFrom(client)
        const run = await runWorkerCycles(
          producer,
          servedAccounts,
          size,
          `${scenario.key}-w${++pairRound}`,
          repositoryOf
        )
        const seconds = run.latencies.length / run.jobsPerSecond + (await drain())
        const cpuAfter = (worker.cpuSeconds() ?? NaN) + (second.cpuSeconds() ?? NaN)
        countCycles(servedCycles, servedWallets, run.cycles)
        const measured = figures(
          run.latencies.length / seconds,
          run.latencies,
          Number.isNaN(cpuAfter - cpuBefore) ? undefined : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length,
          undefined,
          postgresCpu(run.latencies.length)
        )
        const fromDatabase = await database(run.latencies.length)
        await second.stop()
        await sleep(PUBLISH_WAIT_MS)
        const conflicts = (await conflictsSoFar(worker.redisPrefix)) - conflictsBefore
        progress(
          `settlement ${scenario.key} 2 workers: ${conflicts} wallets read again for ${run.latencies.length} jobs`
        )
        return { ...measured, ...fromDatabase, wallet_rereads_per_job: conflicts / run.latencies.length }
      } finally {
        await second.stop()
      }
    }
  }
  let noopRound = 0
  const noopRunner: Runner = {
    name: "no-op worker",
    round: async () => {
      const cpuBefore = noopWorker.cpuSeconds()
      const run = await runWorkerCycles(
        noopProducer,
        servedAccounts,
        size,
        `${scenario.key}-n${++noopRound}`,
        repositoryOf
      )
      const cpuAfter = noopWorker.cpuSeconds()
      return figures(
        run.jobsPerSecond,
        run.latencies,
        cpuBefore === undefined || cpuAfter === undefined
          ? undefined
          : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length
      )
    }
  }
  let ceilingRound = 0
  const ceilingRunner: Runner = {
    name: "pg ceiling",
    round: async () => {
      const postgresCpu = postgresCpuFrom()
      const database = await databaseFiguresFrom(client)
      const run = await ceiling.runCycles(ownWallets, size.cycles, `${scenario.key}-c${++ceilingRound}`, size.seconds)
      countCycles(ownCycles, ownWallets, run.cycles)
      const measured = figures(
        run.movementsPerSecond,
        run.latencies,
        undefined,
        undefined,
        postgresCpu(run.latencies.length)
      )
      return { ...measured, ...(await database(run.latencies.length)) }
    }
  }

  progress(`settlement ${scenario.key}: warming up`)
  const warmUp = warmUpSize(settings)
  const warmed = await runWorkerCycles(producer, servedAccounts, warmUp, `${scenario.key}-warm`, repositoryOf)
  await drain()
  countCycles(servedCycles, servedWallets, warmed.cycles)
  const ceilingWarmed = await ceiling.runCycles(ownWallets, warmUp.cycles, `${scenario.key}-warm`, warmUp.seconds)
  countCycles(ownCycles, ownWallets, ceilingWarmed.cycles)

  await runWorkerCycles(noopProducer, servedAccounts, warmUp, `${scenario.key}-noop-warm`, repositoryOf)

  const common = { suite: "settlement", request: scenario.label, connections: CONCURRENCY }
  /**
   * The scenario's rows and ratios from the rounds so far (each runner's first n rounds, n the
   * fewest any has): kept after every round, so a run stopped in the middle keeps them, and
   * given again with the books' figures (`checked`) at the end.
   */
  const build = (
    rounds: ReadonlyMap<string, ReadonlyArray<RoundFigures>>,
    checked?: { readonly perTransaction: number; readonly delivered: number }
  ): SuiteResult => {
    const ofWorker = rounds.get(workerRunner.name) ?? []
    const ofCeiling = rounds.get(ceilingRunner.name) ?? []
    const ofNoop = rounds.get(noopRunner.name) ?? []
    const ofPair = rounds.get(pairRunner.name) ?? []
    const cpuVsNoop = pairedSoFar(ofWorker, ofNoop, "cpu_us_per_request")
    const rpsVsNoop = pairedSoFar(ofWorker, ofNoop, "rps")
    const rpsVsCeiling = pairedSoFar(ofWorker, ofCeiling, "rps")
    const p99VsCeiling = pairedSoFar(ofWorker, ofCeiling, "p99_ms")
    const pairVsOne = pairedSoFar(ofPair, ofWorker, "rps")
    // PostgreSQL's CPU per job through the worker over its CPU per movement through the ceiling.
    const pgCpuVsCeiling = pairedSoFar(ofWorker, ofCeiling, "postgres_cpu_us_per_request")
    const vs = rpsVsCeiling === undefined || p99VsCeiling === undefined
      ? undefined
      : { reference: ceilingRunner.name, rps: rpsVsCeiling, p99: p99VsCeiling }
    const soFar = checked === undefined ? { rounds_so_far: ofWorker.length } : {}
    const rows: Array<Row> = [
      ...(ofWorker.length === 0 ? [] : [{
        ...common,
        server: workerRunner.name,
        ...figuresOf(ofWorker),
        ...(vs === undefined ? {} : { vs }),
        parameters: {
          wallets: scenario.wallets,
          round_seconds: size.seconds,
          ...(checked === undefined ? {} : {
            jobs_per_transaction: checked.perTransaction,
            events_delivered: checked.delivered
          }),
          limits: "account + repository, day",
          thresholds: 1,
          webhook_endpoints: scenario.wallets,
          ...soFar
        },
        rounds: ofWorker
      }]),
      ...(ofCeiling.length === 0 ? [] : [{
        ...common,
        server: ceilingRunner.name,
        ...figuresOf(ofCeiling),
        parameters: { wallets: scenario.wallets, round_seconds: size.seconds, movements_per_transaction: 1, ...soFar },
        rounds: ofCeiling
      }]),
      ...(ofNoop.length === 0 ? [] : [{
        ...common,
        server: noopRunner.name,
        ...figuresOf(ofNoop),
        parameters: {
          wallets: scenario.wallets,
          round_seconds: size.seconds,
          ...(cpuVsNoop === undefined ? {} : { worker_cpu_vs_noop: cpuVsNoop.median }),
          ...soFar
        },
        rounds: ofNoop
      }]),
      ...(ofPair.length === 0 ? [] : [{
        ...common,
        server: pairRunner.name,
        ...figuresOf(ofPair),
        parameters: {
          wallets: scenario.wallets,
          round_seconds: size.seconds,
          workers: 2,
          ...(pairVsOne === undefined ? {} : { jobs_per_second_vs_one_worker: pairVsOne.median }),
          ...soFar
        },
        rounds: ofPair
      }])
    ]
    const ratios: Record<string, number> = {}
    if (rpsVsCeiling !== undefined) ratios[`settlement_${scenario.key}_vs_ceiling`] = rpsVsCeiling.median
    if (cpuVsNoop !== undefined) {
      ratios[`settlement_${scenario.key}_cpu_vs_noop`] = cpuVsNoop.median
      // The issue's unit is a job spread over many wallets, the worker's common case.
      if (scenario.key === "spread") ratios.settlement_cpu_vs_noop = cpuVsNoop.median
    }
    if (rpsVsNoop !== undefined) ratios[`settlement_${scenario.key}_vs_noop_throughput`] = rpsVsNoop.median
    if (pgCpuVsCeiling !== undefined) {
      ratios[`settlement_${scenario.key}_pg_cpu_vs_ceiling`] = pgCpuVsCeiling.median
      if (scenario.key === "spread") ratios.settlement_pg_cpu_vs_ceiling = pgCpuVsCeiling.median
    }
    if (pairVsOne !== undefined && scenario.key === "hot") ratios.settlement_two_workers_hot_vs_one = pairVsOne.median
    const share = figuresOf(ofWorker.length === 0 ? [] : ofWorker).planning_share
    if (share !== undefined && ofWorker.length > 0) {
      ratios[`settlement_${scenario.key}_planning_share`] = share.median
      if (scenario.key === "spread") ratios.settlement_planning_share = share.median
    }
    return { rows, ratios }
  }

  const rounds = await compareRounds([
    workerRunner,
    ceilingRunner,
    noopRunner,
    ...(scenario.wallets === 1 ? [pairRunner] : [])
  ], {
    connections: CONCURRENCY,
    durationSeconds: settings.durationSeconds,
    rounds: settings.rounds,
    onRound: keepEachRound(
      bench,
      scenario.key,
      build,
      (name, index, f) => progress(`settlement ${scenario.key} round ${index} ${name}: ${roundLine(f)}`)
    )
  })

  await checkQueue(worker.redisPrefix)
  await checkWallets(client, servedCycles, "worker")
  await checkSettlement(client, servedCycles)
  await checkWallets(client, ownCycles, "ceiling")
  await checkGoverned(client, governed, repositoryOf)
  const delivered = (await countEvents(client, governed)) - loggedBefore
  await receiver.waitFor(path, delivered, DELIVERY_TIMEOUT_MS)
  const perTransaction = await jobsPerTransaction(client, servedWallets)
  progress(
    `settlement ${scenario.key}: books check out; ${perTransaction.toFixed(1)} jobs per transaction; ` +
      `${delivered} events delivered`
  )
  const result = build(rounds, { perTransaction, delivered })
  bench.kept.add(result, scenario.key)
  return result
}

/**
 * The receiver the webhook endpoints point at: answers 204 at once, as a receiver that queues its
 * work does, and counts what arrives per path (one path per side or row), each `webhook-id` once
 * (deliveries are at least once, D17) with when it first arrived.
 */
const openReceiver = async () => {
  const arrivals = new Map<string, Map<string, number>>()
  let deliveries = 0
  const server = createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      deliveries++
      const id = request.headers["webhook-id"]
      const path = request.url ?? "/"
      let seen = arrivals.get(path)
      if (seen === undefined) arrivals.set(path, seen = new Map())
      if (typeof id === "string" && !seen.has(id)) seen.set(id, performance.now())
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  /** What arrived at `path`: event id → when it first did. */
  const at = (path: string): ReadonlyMap<string, number> => arrivals.get(path) ?? new Map()
  /** Waits until `count` distinct events have arrived at `path`; fails after `timeoutMs`. */
  const waitFor = async (path: string, count: number, timeoutMs: number) => {
    const deadline = performance.now() + timeoutMs
    while (at(path).size < count) {
      if (performance.now() > deadline) {
        throw new Error(`webhooks: ${at(path).size} of ${count} events arrived at ${path} within ${timeoutMs} ms`)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return { url: (path: string) => `http://127.0.0.1:${port}${path}`, at, waitFor, deliveries: () => deliveries, close }
}
type Receiver = Awaited<ReturnType<typeof openReceiver>>

/** How long the receiver waits for the last delivery after the work that caused it. */
const DELIVERY_TIMEOUT_MS = 120_000

/** One endpoint per account, every event type, at the receiver's `path` (D17). */
const registerEndpoints = (runtime: BenchRuntime, accounts: ReadonlyArray<Account>, url: string) =>
  runtime.runPromise(Effect.gen(function*() {
    const webhooks = yield* Webhooks
    yield* Effect.forEach(accounts, (account) => Effect.orDie(webhooks.create(account, { url })), { concurrency: 8 })
  }))

/** How many events the accounts' logs hold, of any type. */
const countEvents = async (client: pg.Client, accounts: ReadonlyArray<Account>) => {
  const { rows } = await client.query<{ readonly events: string }>(
    `SELECT count(*)::text AS events FROM account_events WHERE account_id = ANY($1::uuid[])`,
    [accounts.map((account) => account.id)]
  )
  return Number(rows[0]?.events ?? 0)
}

/** Wallets of each side of the events comparison: the spread scenario's. */
const ALERT_WALLETS = 100

/**
 * The sides of the events comparison beside the one without: the issue's (one alert threshold and
 * one webhook endpoint an account), and a storm of ten thresholds a dollar apart, which every
 * cycle's reserve crosses down and most releases back up, so that most jobs log a balance event.
 */
const EVENT_SIDES = [
  { key: "events", name: "worker, 1 threshold + webhook", thresholds: 1, path: "/with-events" },
  { key: "event_storm", name: "worker, 10 thresholds + webhook", thresholds: 10, path: "/event-storm" }
] as const

/**
 * Saves `count` alert thresholds an account just under what its wallet has available now, a dollar
 * apart, so the round's cycles cross them: a cycle's reserve (1.00) crosses one down
 * (`wallet.balance_low`), its release (back up 0.60) crosses it up again while the wallet has not
 * drifted a dollar below it (D17). A round drifts each wallet down by 0.40 per cycle; ten thresholds
 * cover 25 cycles a wallet, more than a round gives it. Each account's webhook endpoint is
 * registered once, before the warm-up (`registerEndpoints`).
 */
const prepareAlerts = async (
  runtime: BenchRuntime,
  client: pg.Client,
  accounts: ReadonlyArray<Account>,
  count: number
) => {
  const { rows } = await client.query<{ readonly account_id: string; readonly available: string }>(
    `SELECT account_id::text, (budget_usd - reserved_usd - spent_usd)::text AS available
     FROM wallets WHERE account_id = ANY($1::uuid[])`,
    [accounts.map((account) => account.id)]
  )
  const available = new Map(rows.map((row) => [row.account_id, Money.decimal(row.available)]))
  await runtime.runPromise(Effect.gen(function*() {
    const events = yield* Events
    yield* Effect.forEach(accounts, (account) =>
      Effect.gen(function*() {
        const now = available.get(account.id) ?? Money.decimal(BUDGET)
        const thresholds: Array<Threshold> = Array.from(
          { length: count },
          (_, index) => ({ amount_usd: now.minus(index).minus("0.5") })
        )
        const { version } = yield* events.getAlerts(account)
        yield* Effect.orDie(events.replaceAlerts(account, thresholds, version))
      }), { concurrency: 8 })
  }))
}

/** How many balance events the accounts' logs hold: that an alerted side did cross its thresholds. */
const countBalanceEvents = async (client: pg.Client, accounts: ReadonlyArray<Account>) => {
  const { rows } = await client.query<{ readonly events: string }>(
    `SELECT count(*)::text AS events FROM account_events
     WHERE account_id = ANY($1::uuid[]) AND type IN ('wallet.balance_low', 'wallet.balance_recovered')`,
    [accounts.map((account) => account.id)]
  )
  return Number(rows[0]?.events ?? 0)
}

/**
 * The cost of events (D17, issue 27's item 7): the spread workload on 100 wallets whose accounts
 * have alert thresholds and one webhook endpoint each (every type, at the bench's receiver), beside
 * the same workload on 100 wallets without either, round by round through the same worker, while
 * the webhooks process relays and delivers the events, as in production. `settlement_with_events_vs_without`
 * is the ratio of jobs per second with one threshold (target ≥ 0.8);
 * `settlement_with_event_storm_vs_without` the same with ten thresholds crossed by every cycle.
 * Every event an alerted side logged must have arrived before the figures count.
 */
const measureAlerts = async (
  bench: Bench,
  runtime: BenchRuntime,
  producer: Producer,
  client: pg.Client,
  receiver: Receiver,
  webhooks: WorkerProcess
): Promise<SuiteResult> => {
  const { progress, settings } = bench
  const size = roundSize(settings, EVENT_ROUND_SHARE)
  /**
   * A side; one with thresholds has a webhook endpoint an account at `path`, and its round lasts
   * until the receiver has every event the round logged: delivery work left for later would
   * flatter this side, or fall on the next side's round.
   */
  const sideOf = async (name: string, key: string, thresholds: number, path?: string) => {
    const side = await createAccounts(runtime, name, ALERT_WALLETS)
    const accounts = side.map((s) => s.account)
    const accountIds = side.map((s) => s.account.id)
    const walletIds = side.map((s) => s.walletId)
    const cyclesByWallet = new Map(walletIds.map((id) => [id, 0]))
    // Endpoints get what is logged after they exist: what the logs hold now is not delivered.
    const loggedBefore = await countEvents(client, accounts)
    if (path !== undefined) await registerEndpoints(runtime, accounts, receiver.url(path))
    const prepare = () => thresholds === 0 ? Promise.resolve() : prepareAlerts(runtime, client, accounts, thresholds)
    /** Waits until every event logged so far has arrived; how long that took, in seconds. */
    const drain = async () => {
      if (path === undefined) return 0
      const begun = performance.now()
      await receiver.waitFor(path, (await countEvents(client, accounts)) - loggedBefore, DELIVERY_TIMEOUT_MS)
      return (performance.now() - begun) / 1000
    }
    let round = 0
    const runner: Runner = {
      name,
      round: async () => {
        await prepare()
        const cpuBefore = bench.worker.cpuSeconds()
        const webhooksCpu = webhooksCpuFrom(webhooks, receiver)
        const postgresCpu = postgresCpuFrom()
        const database = await databaseFiguresFrom(client)
        const run = await runWorkerCycles(producer, accountIds, size, `${key}-r${++round}`)
        const seconds = run.latencies.length / run.jobsPerSecond + (await drain())
        const cpuAfter = bench.worker.cpuSeconds()
        countCycles(cyclesByWallet, walletIds, run.cycles)
        const measured = figures(
          run.latencies.length / seconds,
          run.latencies,
          cpuBefore === undefined || cpuAfter === undefined
            ? undefined
            : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length,
          webhooksCpu(),
          postgresCpu(run.latencies.length)
        )
        return { ...measured, ...(await database(run.latencies.length)) }
      }
    }
    const warm = async () => {
      await prepare()
      const warmed = await runWorkerCycles(producer, accountIds, warmUpSize(settings), `${key}-warm`)
      await drain()
      countCycles(cyclesByWallet, walletIds, warmed.cycles)
    }
    return { runner, warm, cyclesByWallet, accounts, thresholds, loggedBefore }
  }
  const without = await sideOf("worker, no events", "plain", 0)
  const alerted = await Promise.all(EVENT_SIDES.map(async (spec) => ({
    ...(await sideOf(spec.name, spec.key, spec.thresholds, spec.path)),
    spec
  })))
  progress("settlement events: warming up")
  for (const side of [...alerted, without]) await side.warm()
  const rounds = await compareRounds([...alerted.map((side) => side.runner), without.runner], {
    connections: CONCURRENCY,
    durationSeconds: settings.durationSeconds,
    rounds: settings.rounds,
    onRound: keepEachRound(
      bench,
      "events",
      roundsSoFar(without.runner.name, "reserve+spend+release, 100 wallets"),
      (name, index, f) => progress(`settlement events round ${index} ${name}: ${roundLine(f)}`)
    )
  })
  await checkQueue(bench.worker.redisPrefix)
  for (const side of [...alerted, without]) {
    await checkWallets(client, side.cyclesByWallet, side.runner.name)
    await checkSettlement(client, side.cyclesByWallet)
  }
  if ((await countBalanceEvents(client, without.accounts)) !== 0) {
    throw new Error("events: the side without thresholds logged balance events")
  }
  const ofPlain = rounds.get(without.runner.name) ?? []
  const common = { suite: "settlement", request: "reserve+spend+release, 100 wallets", connections: CONCURRENCY }
  const rows: Array<Row> = []
  const ratios: Record<string, number> = {}
  for (const side of alerted) {
    const crossings = await countBalanceEvents(client, side.accounts)
    const jobs = [...side.cyclesByWallet.values()].reduce((sum, n) => sum + n, 0) * JOBS_PER_CYCLE
    if (crossings === 0) throw new Error(`events: ${side.runner.name} crossed no threshold; it measured nothing`)
    // Every event the side logged reached its account's endpoint (each round waited for them).
    const logged = (await countEvents(client, side.accounts)) - side.loggedBefore
    await receiver.waitFor(side.spec.path, logged, DELIVERY_TIMEOUT_MS)
    progress(
      `settlement events, ${side.runner.name}: books check out; ${crossings} balance events for ${jobs} jobs; ` +
        `${logged} events delivered`
    )
    const ofSide = rounds.get(side.runner.name) ?? []
    const vs = {
      reference: without.runner.name,
      rps: pairedRatio(ofSide, ofPlain, "rps"),
      p99: pairedRatio(ofSide, ofPlain, "p99_ms")
    }
    rows.push({
      ...common,
      server: side.runner.name,
      ...figuresOf(ofSide),
      vs,
      parameters: {
        wallets: ALERT_WALLETS,
        round_seconds: size.seconds,
        thresholds: side.thresholds,
        events_per_job: logged / jobs,
        webhook_endpoints: ALERT_WALLETS,
        events_delivered: logged
      },
      rounds: ofSide
    })
    ratios[`settlement_with_${side.spec.key}_vs_without`] = vs.rps.median
  }
  rows.push({
    ...common,
    server: without.runner.name,
    ...figuresOf(ofPlain),
    parameters: { wallets: ALERT_WALLETS, round_seconds: size.seconds, thresholds: 0, webhook_endpoints: 0 },
    rounds: ofPlain
  })
  bench.kept.add({ rows, ratios }, "events")
  return { rows, ratios }
}

/** Wallets of each side of the fleet controls comparison: the spread scenario's. */
const FLEET_WALLETS = 100

/** What every reserve and every spend of the side with fleet controls carries (D19). */
const FLEET_FIELDS = {
  reserve: { labels: { team: "bench", agent: "bench" } },
  spend: { model: "bench-model" }
} as const satisfies CycleFields

/** The label the side's label limit counts: one its every session carries. */
const FLEET_LABEL = `team=${FLEET_FIELDS.reserve.labels.team}`

/**
 * Far above the sessions the runners hold open at once (at most `CONCURRENCY`): every reserve that
 * opens a session is judged against it, none refused.
 */
const FLEET_MAX_OPEN_SESSIONS = 1000

/**
 * On the account's day limit, which a run comes nowhere near (it spends a few hundred dollars of
 * `GOVERNING_LIMIT`): judged on every movement, never announced. A crossing is one event a limit,
 * percentage and day; what a fleet pays every job is the judging.
 */
const FLEET_WARN_AT_PERCENT: ReadonlyArray<number> = [50, 80]

/**
 * A side's limits: both have the served accounts' day limits on the account and on its repository;
 * with fleet controls, warnings on the account's day limit, a day limit on the label every reserve
 * carries and a concurrency limit on the account.
 */
const fleetLimits = (repositoryId: string, fleet: boolean): ReadonlyArray<LimitRow> =>
  fleet
    ? [
      dayLimit("account", null, FLEET_WARN_AT_PERCENT),
      dayLimit("repository", repositoryId),
      dayLimit("label", FLEET_LABEL),
      {
        scope: "account",
        scope_id: null,
        period: "concurrent",
        amount_usd: null,
        max_open_sessions: FLEET_MAX_OPEN_SESSIONS,
        warn_at_percent: []
      }
    ]
    : governingLimits(repositoryId)

/**
 * What a side's books say its jobs carried: every movement, session and running total the labels
 * every reserve sent, every spend entry and running total the model every spend sent, and nothing
 * else; a side that sent neither, none. A side whose jobs lost their fields measured nothing.
 */
const checkMarks = async (client: pg.Client, walletIds: ReadonlyArray<string>, fields: CycleFields, who: string) => {
  const labels = fields.reserve === undefined ? null : JSON.stringify(fields.reserve.labels)
  const model = fields.spend?.model ?? null
  const { rows } = await client.query<
    { readonly entries: string; readonly sessions: string; readonly totals: string; readonly spends: string }
  >(
    `SELECT
       (SELECT count(*) FROM ledger_entries e WHERE e.wallet_id = ANY($1::uuid[]) AND e.kind <> 'budget_set'
          AND (e.labels IS DISTINCT FROM $2::jsonb
            OR e.model IS DISTINCT FROM CASE WHEN e.kind = 'spend' THEN $3::text END))::text AS entries,
       (SELECT count(*) FROM settlement_sessions s
          WHERE s.wallet_id = ANY($1::uuid[]) AND s.labels IS DISTINCT FROM $2::jsonb)::text AS sessions,
       (SELECT count(*) FROM settlement_spend_totals t WHERE t.wallet_id = ANY($1::uuid[])
          AND (t.labels IS DISTINCT FROM $2::jsonb OR t.model IS DISTINCT FROM $3::text))::text AS totals,
       (SELECT count(*) FROM ledger_entries e WHERE e.wallet_id = ANY($1::uuid[]) AND e.kind = 'spend')::text AS spends`,
    [walletIds, labels, model]
  )
  const row = rows[0]
  if (row === undefined || row.entries !== "0" || row.sessions !== "0" || row.totals !== "0" || row.spends === "0") {
    throw new Error(
      `${who}: entries, sessions and totals not marked as its jobs were (${labels}, ${model}): ${
        JSON.stringify(row)
      } stray`
    )
  }
}

/** How many limit events the accounts' logs hold: none, when every limit stayed far away. */
const countLimitEvents = async (client: pg.Client, accounts: ReadonlyArray<Account>) => {
  const { rows } = await client.query<{ readonly events: string }>(
    `SELECT count(*)::text AS events FROM account_events
     WHERE account_id = ANY($1::uuid[]) AND type IN ('limit.approaching', 'limit.reached')`,
    [accounts.map((account) => account.id)]
  )
  return Number(rows[0]?.events ?? 0)
}

/** What sets one side of a two-sided comparison apart: its accounts' set-up, its cycles' fields, its checks. */
interface SideSpec {
  readonly name: string
  readonly key: string
  /** Readies the side's accounts; answers the repository its sessions are attributed to, if any. */
  readonly prepare: (accounts: ReadonlyArray<Account>) => Promise<ReadonlyMap<string, string>>
  /** The user each account's sessions are attributed to, if any. */
  readonly users?: (accounts: ReadonlyArray<Account>) => Promise<ReadonlyMap<string, string>>
  readonly fields?: CycleFields
  /** The entries each wallet has before its cycles (`checkWallets`). */
  readonly setUpEntries?: number
  /** What the side must show after its rounds, beside the books every side is held to. */
  readonly check?: (
    side: { readonly accounts: ReadonlyArray<Account>; readonly walletIds: ReadonlyArray<string> },
    cycles: ReadonlyMap<string, number>,
    repositoryOf: ReadonlyMap<string, string>
  ) => Promise<void>
  readonly parameters: Readonly<Record<string, string | number>>
}

/**
 * The 100-wallet workload on two sides that differ only as their specs say, round by round
 * through the same worker: each side's row with its figures, the first's against the second's,
 * and `ratio` their jobs/s ratio. The books of both sides are checked after the rounds.
 */
const measureSides = async (
  bench: Bench,
  runtime: BenchRuntime,
  producer: Producer,
  client: pg.Client,
  comparison: {
    readonly part: string
    readonly label: string
    readonly wallets: number
    readonly subject: SideSpec
    readonly reference: SideSpec
    readonly ratio: string
  }
): Promise<SuiteResult> => {
  const { progress, settings } = bench
  const size = roundSize(settings, EVENT_ROUND_SHARE)
  const sideOf = async (spec: SideSpec) => {
    const side = await createAccounts(runtime, spec.name, comparison.wallets)
    const accounts = side.map((s) => s.account)
    const accountIds = accounts.map((account) => account.id)
    const walletIds = side.map((s) => s.walletId)
    const cyclesByWallet = new Map(walletIds.map((id) => [id, 0]))
    const repositoryOf = await spec.prepare(accounts)
    const userOf = await spec.users?.(accounts) ?? new Map<string, string>()
    const fields = spec.fields ?? {}
    let round = 0
    const runner: Runner = {
      name: spec.name,
      round: async () => {
        const cpuBefore = bench.worker.cpuSeconds()
        const postgresCpu = postgresCpuFrom()
        const database = await databaseFiguresFrom(client)
        const run = await runWorkerCycles(
          producer,
          accountIds,
          size,
          `${spec.key}-r${++round}`,
          repositoryOf,
          fields,
          userOf
        )
        const cpuAfter = bench.worker.cpuSeconds()
        countCycles(cyclesByWallet, walletIds, run.cycles)
        const measured = figures(
          run.jobsPerSecond,
          run.latencies,
          cpuBefore === undefined || cpuAfter === undefined
            ? undefined
            : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length,
          undefined,
          postgresCpu(run.latencies.length)
        )
        return { ...measured, ...(await database(run.latencies.length)) }
      }
    }
    const warm = async () => {
      const warmed = await runWorkerCycles(
        producer,
        accountIds,
        warmUpSize(settings),
        `${spec.key}-warm`,
        repositoryOf,
        fields,
        userOf
      )
      countCycles(cyclesByWallet, walletIds, warmed.cycles)
    }
    return { spec, runner, warm, accounts, walletIds, cyclesByWallet, repositoryOf }
  }
  const reference = await sideOf(comparison.reference)
  const subject = await sideOf(comparison.subject)
  progress(`settlement ${comparison.label}: warming up`)
  for (const side of [subject, reference]) await side.warm()
  const request = `reserve+spend+release, ${comparison.wallets} wallets`
  const rounds = await compareRounds([subject.runner, reference.runner], {
    connections: CONCURRENCY,
    durationSeconds: settings.durationSeconds,
    rounds: settings.rounds,
    onRound: keepEachRound(
      bench,
      comparison.part,
      roundsSoFar(reference.runner.name, request),
      (name, index, f) => progress(`settlement ${comparison.label} round ${index} ${name}: ${roundLine(f)}`)
    )
  })
  await checkQueue(bench.worker.redisPrefix)
  const perTransaction = new Map<string, number>()
  for (const side of [subject, reference]) {
    const who = side.runner.name
    await checkWallets(client, side.cyclesByWallet, who, side.spec.setUpEntries)
    await checkSettlement(client, side.cyclesByWallet)
    await side.spec.check?.(side, side.cyclesByWallet, side.repositoryOf)
    perTransaction.set(who, await jobsPerTransaction(client, side.walletIds))
  }
  progress(
    `settlement ${comparison.label}: books check out; jobs per transaction ${
      [...perTransaction].map(([who, n]) => `${n.toFixed(1)} (${who})`).join(", ")
    }`
  )
  const ofSubject = rounds.get(subject.runner.name) ?? []
  const ofReference = rounds.get(reference.runner.name) ?? []
  const vs = {
    reference: reference.runner.name,
    rps: pairedRatio(ofSubject, ofReference, "rps"),
    p99: pairedRatio(ofSubject, ofReference, "p99_ms")
  }
  const common = { suite: "settlement", request, connections: CONCURRENCY }
  const parametersOf = (side: typeof subject) => ({
    wallets: comparison.wallets,
    round_seconds: size.seconds,
    jobs_per_transaction: perTransaction.get(side.runner.name) ?? NaN,
    ...side.spec.parameters
  })
  const result: SuiteResult = {
    rows: [
      {
        ...common,
        server: subject.runner.name,
        ...figuresOf(ofSubject),
        vs,
        parameters: {
          ...parametersOf(subject),
          worker_cpu_vs_without: pairedRatio(ofSubject, ofReference, "cpu_us_per_request").median
        },
        rounds: ofSubject
      },
      {
        ...common,
        server: reference.runner.name,
        ...figuresOf(ofReference),
        parameters: parametersOf(reference),
        rounds: ofReference
      }
    ],
    ratios: { [comparison.ratio]: vs.rps.median }
  }
  bench.kept.add(result, comparison.part)
  return result
}

/**
 * What a side whose limits are all far away must show after its rounds: its spends attributed
 * to their repository, and no limit event logged (judged in every batch, none reached).
 */
const checkFarLimits = (client: pg.Client): NonNullable<SideSpec["check"]> => async (side, _cycles, repositoryOf) => {
  await checkGoverned(client, side.accounts, repositoryOf)
  const announced = await countLimitEvents(client, side.accounts)
  if (announced !== 0) throw new Error(`${announced} limit events; every limit was to stay far away`)
}

/** Day limits on the account and a repository every session is attributed to, with the fleet's on top or not. */
const limitedSide =
  (runtime: BenchRuntime, client: pg.Client, fleet: boolean) => async (accounts: ReadonlyArray<Account>) => {
    const repositoryOf = await createRepositories(runtime, accounts)
    await saveLimits(
      client,
      accounts.map((account) => ({ account, limits: fleetLimits(repositoryOf.get(account.id) ?? "", fleet) }))
    )
    return repositoryOf
  }

/**
 * The cost of fleet controls (D19): the spread workload on 100 wallets whose accounts have the
 * served accounts' day limits (on the account and on a repository every session is attributed
 * to), beside the same on 100 wallets with, in addition, a concurrency limit on the account, a day
 * limit on a label every reserve carries, and warnings on the account's day limit, every spend
 * naming a model; round by round through the same worker. Every limit is far away: all are judged
 * in every batch, none refuses or announces. Neither side has alert thresholds or webhook
 * endpoints, whose cost the events comparison measures: what differs is the fleet controls alone.
 * `settlement_with_fleet_controls_vs_without` is the ratio of jobs per second (target ≥ 0.9).
 * Rounds half as long as the scenarios' worker rounds, as the events comparison's, so the whole
 * run keeps within its ten minutes on a loaded machine; the ratio is paired round by round.
 */
const measureFleetControls = (bench: Bench, runtime: BenchRuntime, producer: Producer, client: pg.Client) => {
  const dayLimits = "account + repository, day"
  const checkLimits = checkFarLimits(client)
  return measureSides(bench, runtime, producer, client, {
    part: "fleet",
    label: "fleet controls",
    wallets: FLEET_WALLETS,
    ratio: "settlement_with_fleet_controls_vs_without",
    subject: {
      name: "worker, day limits + fleet controls",
      key: "fleet",
      prepare: limitedSide(runtime, client, true),
      fields: FLEET_FIELDS,
      check: async (side, cycles, repositoryOf) => {
        await checkLimits(side, cycles, repositoryOf)
        await checkMarks(client, side.walletIds, FLEET_FIELDS, "worker, day limits + fleet controls")
      },
      parameters: {
        limits: `${dayLimits}; ${FLEET_LABEL}, day; account, concurrent`,
        max_open_sessions: FLEET_MAX_OPEN_SESSIONS,
        warn_at_percent: FLEET_WARN_AT_PERCENT.join(", "),
        labels: JSON.stringify(FLEET_FIELDS.reserve.labels),
        model: FLEET_FIELDS.spend.model
      }
    },
    reference: {
      name: "worker, day limits",
      key: "limits",
      prepare: limitedSide(runtime, client, false),
      check: async (side, cycles, repositoryOf) => {
        await checkLimits(side, cycles, repositoryOf)
        await checkMarks(client, side.walletIds, {}, "worker, day limits")
      },
      parameters: { limits: dayLimits }
    }
  })
}

/** The zone of the governed side's accounts (D22): not UTC, and half an hour off the UTC hours. */
const GOVERNANCE_ZONE = "Asia/Kolkata"

/**
 * A member of each account, every session of the account attributed to them (D16), written in
 * SQL as the organisations' members are: what is measured is the batch's enforcement.
 */
const membersOf = async (client: pg.Client, accounts: ReadonlyArray<Account>) => {
  const members = new Map(accounts.map((account) => [account.id, randomUUID()]))
  await client.query(
    `WITH made AS (
       INSERT INTO users (id, email, name, password_hash)
       SELECT m, 'bench-' || m || '@example.com', 'Bench member', 'x' FROM unnest($2::uuid[]) AS m
     )
     INSERT INTO memberships (user_id, organisation_id) SELECT * FROM unnest($2::uuid[], $1::uuid[])`,
    [[...members.keys()], [...members.values()]]
  )
  return members
}

/**
 * Saves the accounts' zone as if long ago (D22): the periods are the zone's, none carried over
 * from an earlier zone.
 */
const saveZone = async (client: pg.Client, accounts: ReadonlyArray<Account>, timezone: string) => {
  await client.query(
    `INSERT INTO account_settings (account_kind, account_id, timezone, version)
     SELECT 'client', a, $2, 1 FROM unnest($1::uuid[]) AS a`,
    [accounts.map((account) => account.id), timezone]
  )
}

/**
 * The cost of D22's rules: the spread workload on 100 wallets whose accounts have D16's day
 * limits (on the account and on the repository every session is attributed to), every session
 * attributed to a member too, beside the same on 100 wallets with, in addition, an `each_user` day
 * limit, a rolling 60-minute limit on the account, and the accounts' zone Asia/Kolkata (its
 * days start at 18:30 UTC, so each day limit reads its edges by the quarter hour). Every limit is
 * far away: all are judged in every batch, none refuses. `settlement_with_governance_vs_without`
 * is the ratio of jobs per second (target at least 0.9).
 */
const measureGovernance = (bench: Bench, runtime: BenchRuntime, producer: Producer, client: pg.Client) => {
  const dayLimits = "account + repository, day"
  const governed = (repositoryId: string): ReadonlyArray<LimitRow> => [
    ...governingLimits(repositoryId),
    dayLimit("each_user", null),
    { ...dayLimit("account", null), period: "rolling", window_minutes: 60 }
  ]
  const side = (governance: boolean) => async (accounts: ReadonlyArray<Account>) => {
    const repositoryOf = await createRepositories(runtime, accounts)
    await saveLimits(
      client,
      accounts.map((account) => {
        const repository = repositoryOf.get(account.id) ?? ""
        return { account, limits: governance ? governed(repository) : governingLimits(repository) }
      })
    )
    if (governance) await saveZone(client, accounts, GOVERNANCE_ZONE)
    return repositoryOf
  }
  const check = checkFarLimits(client)
  return measureSides(bench, runtime, producer, client, {
    part: "governance",
    label: "governance",
    wallets: FLEET_WALLETS,
    ratio: "settlement_with_governance_vs_without",
    subject: {
      name: "worker, day limits + each user, rolling hour, zone",
      key: "governance",
      prepare: side(true),
      users: (accounts) => membersOf(client, accounts),
      check,
      parameters: { limits: `${dayLimits}; each_user, day; account, rolling 60 min`, timezone: GOVERNANCE_ZONE }
    },
    reference: {
      name: "worker, day limits, UTC",
      key: "ungoverned",
      prepare: side(false),
      users: (accounts) => membersOf(client, accounts),
      check,
      parameters: { limits: dayLimits, timezone: "UTC" }
    }
  })
}

/** Wallets of each side of the grants comparison (D21), and what each grant holds. */
const GRANT_WALLETS = 100
const GRANT_AMOUNT = Money.decimal("100000")
/**
 * Three live grants per wallet, in the three ways the draw-down order tells them apart: a
 * priority, an expiry (a year out, so none ends in a run) and a category; the budget's base after.
 */
const GRANTS: ReadonlyArray<
  { readonly priority: number; readonly category: GrantCategory; readonly expires: boolean }
> = [
  { priority: 10, category: "paid", expires: true },
  { priority: 50, category: "promotional", expires: true },
  { priority: 50, category: "paid", expires: false }
]

const addGrants = (runtime: BenchRuntime, accounts: ReadonlyArray<Account>) =>
  runtime.runPromise(Effect.gen(function*() {
    const wallets = yield* Wallets
    const expiresAt = DateTime.unsafeMake(Date.now() + 365 * 86_400_000)
    yield* Effect.forEach(accounts, (account) =>
      Effect.forEach(GRANTS, (grant) =>
        wallets.addCredit(account, {
          amount_usd: GRANT_AMOUNT,
          priority: grant.priority,
          category: grant.category,
          ...(grant.expires ? { expires_at: expiresAt } : {})
        })).pipe(Effect.orDie), { concurrency: 8, discard: true })
  }))

/** Every grant of the side live and adding up, and its earmarks all returned after the last release. */
const checkGrants = async (client: pg.Client, walletIds: ReadonlyArray<string>) => {
  const { rows } = await client.query<{ readonly grants: string; readonly bad: string; readonly drawn: string }>(
    `SELECT count(*)::text AS grants, sum(drawn_usd)::text AS drawn,
            count(*) FILTER (WHERE state <> 'live' OR held_usd <> 0 OR ended_usd <> 0)::text AS bad
     FROM wallet_grants WHERE wallet_id = ANY($1::uuid[])`,
    [walletIds]
  )
  const row = rows[0]
  if (row === undefined || Number(row.grants) !== walletIds.length * GRANTS.length || row.bad !== "0") {
    throw new Error(
      `grants: ${JSON.stringify(row)}, expected ${walletIds.length * GRANTS.length} live grants, none held`
    )
  }
  return Money.decimal(row.drawn ?? "0")
}

/**
 * Settlement with three live grants per wallet against settlement without (D21): the same
 * cycles on 100 wallets each side; with grants, every reserve earmarks on them and every spend
 * draws them, in the batch's one transition.
 */
const measureGrants = (bench: Bench, runtime: BenchRuntime, producer: Producer, client: pg.Client) =>
  measureSides(bench, runtime, producer, client, {
    part: "grants",
    label: "grants",
    wallets: GRANT_WALLETS,
    ratio: "settlement_with_grants_vs_without",
    subject: {
      name: "worker, 3 live grants per wallet",
      key: "grants",
      prepare: async (accounts) => {
        await addGrants(runtime, accounts)
        return new Map()
      },
      setUpEntries: 1 + GRANTS.length,
      // Every spend drew the first grant (it never runs out in a run): all of the side's spend is the grants'.
      check: async (side, cycles) => {
        const drawn = await checkGrants(client, side.walletIds)
        const spent = CYCLE.spend.times([...cycles.values()].reduce((sum, n) => sum + n, 0))
        if (!drawn.eq(spent)) {
          throw new Error(`grants drew ${Money.format(drawn)}, the side spent ${Money.format(spent)}`)
        }
      },
      parameters: {
        grants: GRANTS.map((g) => `${g.priority}/${g.category}/${g.expires ? "expiring" : "never"}`).join(", ")
      }
    },
    reference: { name: "worker, no grants", key: "base", prepare: async () => new Map(), parameters: {} }
  })

/** The receiver's path of the relay row's endpoint (the alerted sides' are in `EVENT_SIDES`). */
const RELAY_PATH = "/relay"
/** Events a relay round finds in the log at once. */
const RELAY_EVENTS = 2000

/**
 * The relay's throughput (D17, issue 27's item 7): a round appends `RELAY_EVENTS` events to one
 * account's log in one statement, as a burst of settlement would, and times them until the
 * receiver behind the account's one endpoint has every one. Events per second from commit to the
 * last arrival; the latencies are each event's commit → first arrival. The events are copies of
 * the alerted side's (their data is what the webhooks process sends; which wallet it names does not
 * matter). The CPU is the webhooks process's per event, which is one delivery here.
 */
const measureRelay = async (
  bench: Bench,
  runtime: BenchRuntime,
  client: pg.Client,
  receiver: Receiver,
  webhooks: WorkerProcess
): Promise<SuiteResult> => {
  const [owner] = await createAccounts(runtime, "relay", 1)
  if (owner === undefined) throw new Error("relay: no account")
  const { rows: samples } = await client.query<{ type: string; data: string }>(
    `SELECT type, data::text FROM account_events
     WHERE type IN ('wallet.balance_low', 'wallet.balance_recovered') ORDER BY position LIMIT $1`,
    [RELAY_EVENTS]
  )
  // Without the events comparison before it (`--parts`), events of the same shape.
  if (samples.length === 0) {
    samples.push(
      ...["wallet.balance_low", "wallet.balance_recovered"].map((type) => ({
        type,
        data: JSON.stringify({ wallet_id: owner.walletId, threshold_usd: "1.000000", available_usd: "0.500000" })
      }))
    )
  }
  const loggedBefore = await countEvents(client, [owner.account])
  await registerEndpoints(runtime, [owner.account], receiver.url(RELAY_PATH))
  const { rows: [endpoint] } = await client.query<{ readonly id: string }>(
    `SELECT id::text FROM webhook_endpoints WHERE account_id = $1`,
    [owner.account.id]
  )
  if (endpoint === undefined) throw new Error("relay: no endpoint")
  const append = () =>
    runtime.runPromise(Effect.gen(function*() {
      const repo = yield* EventsRepo
      yield* repo.append(Array.from({ length: RELAY_EVENTS }, (_, index) => {
        const sample = samples[index % samples.length]
        return {
          account_kind: owner.account.kind,
          account_id: owner.account.id,
          type: sample?.type ?? "",
          data: sample?.data ?? "{}"
        }
      }))
    }))
  const baseline = await startDeliveryBaseline(bench.stack.databaseUrl)
  const rounds: Array<RoundFigures> = []
  const baselineRounds: Array<RoundFigures> = []
  const relayRequest = `relay: ${RELAY_EVENTS} logged events → 1 endpoint`
  const build = (): SuiteResult => {
    const rps = pairedSoFar(rounds, baselineRounds, "rps")
    const cpu = pairedSoFar(rounds, baselineRounds, "cpu_us_per_request")
    return {
      rows: [
        {
          suite: "settlement",
          request: relayRequest,
          server: "webhooks relay + delivery",
          connections: 1,
          ...figuresOf(rounds),
          ...(rps === undefined ? {} : {
            vs: { reference: "delivery baseline", rps, p99: pairedSoFar(rounds, baselineRounds, "p99_ms") ?? rps }
          }),
          parameters: {
            events_per_round: RELAY_EVENTS,
            endpoints: 1,
            receiver: "204 at once",
            ...(cpu === undefined ? {} : { cpu_vs_delivery_baseline: cpu.median })
          },
          rounds
        },
        ...(baselineRounds.length === 0 ? [] : [{
          suite: "settlement",
          request: relayRequest,
          server: "delivery baseline",
          connections: DELIVERY_BASELINE_CONCURRENCY,
          ...figuresOf(baselineRounds),
          parameters: {
            events_per_round: RELAY_EVENTS,
            what: "sign (Standard Webhooks), POST with fetch, record the attempt",
            in_flight: DELIVERY_BASELINE_CONCURRENCY
          },
          rounds: baselineRounds
        }])
      ],
      ratios: {
        ...(rps === undefined ? {} : { webhooks_relay_vs_delivery_baseline: rps.median }),
        ...(cpu === undefined ? {} : { webhooks_cpu_vs_delivery_baseline: cpu.median })
      }
    }
  }
  try {
    for (let round = 1; round <= bench.settings.rounds; round++) {
      const before = new Set(receiver.at(RELAY_PATH).keys())
      const begun = performance.now()
      await append()
      const committed = performance.now()
      const cpuBefore = webhooks.cpuSeconds()
      await receiver.waitFor(RELAY_PATH, before.size + RELAY_EVENTS, DELIVERY_TIMEOUT_MS)
      const cpuAfter = webhooks.cpuSeconds()
      const arrivals = [...receiver.at(RELAY_PATH)].filter(([id]) => !before.has(id)).map(([, at]) => at)
      const seconds = (Math.max(...arrivals) - committed) / 1000
      const latencies = arrivals.map((at) => at - committed)
      const figuresOfRound = figures(
        RELAY_EVENTS / seconds,
        latencies,
        cpuBefore === undefined || cpuAfter === undefined ? undefined : ((cpuAfter - cpuBefore) * 1e6) / RELAY_EVENTS
      )
      rounds.push(figuresOfRound)
      bench.progress(
        `settlement relay round ${round}: ${figuresOfRound.rps.toFixed(0)} events/s delivered, ` +
          `p50 ${figuresOfRound.p50_ms.toFixed(0)} ms, p99 ${figuresOfRound.p99_ms.toFixed(0)} ms, ` +
          `${figuresOfRound.cpu_us_per_request?.toFixed(0) ?? "?"} webhooks CPU µs/event ` +
          `(append ${(committed - begun).toFixed(0)} ms)`
      )
      bench.kept.add(build(), "relay")
      // The same events again, from the baseline, to a path of the round's own.
      const path = `${DELIVERY_BASELINE_PATH}-${round}`
      const started = performance.now()
      const baselineCpuBefore = baseline.cpuSeconds()
      const delivered = await baseline.deliver({
        account_id: owner.account.id,
        endpoint_id: endpoint.id,
        url: receiver.url(path),
        after_position: loggedBefore + (round - 1) * RELAY_EVENTS,
        count: RELAY_EVENTS
      })
      const baselineCpuAfter = baseline.cpuSeconds()
      if (delivered !== RELAY_EVENTS || receiver.at(path).size !== RELAY_EVENTS) {
        throw new Error(`delivery baseline: ${receiver.at(path).size} of ${RELAY_EVENTS} events arrived`)
      }
      const baselineArrivals = [...receiver.at(path).values()]
      const baselineRound = figures(
        RELAY_EVENTS / ((Math.max(...baselineArrivals) - started) / 1000),
        baselineArrivals.map((at) => at - started),
        baselineCpuBefore === undefined || baselineCpuAfter === undefined
          ? undefined
          : ((baselineCpuAfter - baselineCpuBefore) * 1e6) / RELAY_EVENTS
      )
      baselineRounds.push(baselineRound)
      bench.progress(
        `settlement delivery baseline round ${round}: ${baselineRound.rps.toFixed(0)} events/s, ` +
          `${baselineRound.cpu_us_per_request?.toFixed(0) ?? "?"} CPU µs/delivery`
      )
      bench.kept.add(build(), "relay")
    }
  } finally {
    await baseline.stop()
  }
  const logged = (await countEvents(client, [owner.account])) - loggedBefore
  if (logged !== RELAY_EVENTS * bench.settings.rounds || receiver.at(RELAY_PATH).size !== logged) {
    throw new Error(`relay: ${receiver.at(RELAY_PATH).size} events arrived of ${logged} logged`)
  }
  return build()
}

/** The receiver's path of the delivery baseline's rounds (one a round: the same events again). */
const DELIVERY_BASELINE_PATH = "/delivery-baseline"
/** As many in flight as the webhooks process delivers at once (its WEBHOOK_CONCURRENCY default). */
const DELIVERY_BASELINE_CONCURRENCY = 50

/**
 * `bench/baseline/deliveries.ts` in a process of its own (its CPU is read from /proc): a round is
 * one line to its stdin, answered when its last attempt is recorded.
 */
const startDeliveryBaseline = async (databaseUrl: string) => {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/baseline/deliveries.ts"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl },
    stdio: ["pipe", "pipe", "pipe"]
  })
  const killOnExit = () => child.kill("SIGKILL")
  process.once("exit", killOnExit)
  let errors = ""
  child.stderr.on("data", (chunk: Buffer) => {
    errors = (errors + chunk.toString("utf8")).slice(-4096)
  })
  const lines = createInterface({ input: child.stdout })
  const waiting: Array<(line: string) => void> = []
  lines.on("line", (line) => waiting.shift()?.(line))
  const next = () =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`delivery baseline: no answer; ${errors}`)), DELIVERY_TIMEOUT_MS)
      waiting.push((line) => {
        clearTimeout(timer)
        resolve(line)
      })
    })
  if ((await next()) !== "ready") throw new Error(`delivery baseline did not start: ${errors}`)
  const pid = child.pid ?? 0
  return {
    cpuSeconds: () => readCpuSeconds(pid),
    deliver: async (round: Readonly<Record<string, string | number>>) => {
      const answer = next()
      child.stdin.write(`${JSON.stringify(round)}\n`)
      const line = await answer
      const match = /^delivered (\d+)$/.exec(line)
      if (match?.[1] === undefined) throw new Error(`delivery baseline: ${line} ${errors}`)
      return Number(match[1])
    },
    stop: async () => {
      child.stdin.end()
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve()
        else {
          const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
          child.once("exit", () => {
            clearTimeout(timer)
            resolve()
          })
        }
      })
      process.off("exit", killOnExit)
    }
  }
}

/** The scale comparison's workload: 100 wallets, as the spread scenario's. */
const SCALE_WALLETS = 100
/** Other accounts in each side's database: the small side's and the large side's. */
const SCALE_OTHERS = [100, 100_000] as const

/**
 * `count` other accounts in one go through the migrations' schema, as an installation that has
 * served them for a while holds them: an organisation and an enforced wallet each with its
 * budget's entry, and every fourth with a released session's history (reserve, spend, release:
 * three entries and three settlement records). SQL `generate_series`, no service calls: loading
 * 100,000 accounts takes seconds, not the minutes their API calls would.
 */
const loadOtherAccounts = async (client: pg.Client, count: number) => {
  await client.query("BEGIN")
  try {
    await client.query(
      `CREATE TEMP TABLE bench_others ON COMMIT DROP AS
       SELECT g, gen_random_uuid() AS account_id, gen_random_uuid() AS wallet_id, g % 4 = 0 AS has_session
       FROM generate_series(1, $1::int) g`,
      [count]
    )
    await client.query(`INSERT INTO organisations (id, name) SELECT account_id, 'bench other ' || g FROM bench_others`)
    await client.query(
      `INSERT INTO wallets (id, account_kind, account_id, budget_usd, spent_usd, enforced, last_sequence)
       SELECT wallet_id, 'client', account_id, 100, CASE WHEN has_session THEN 0.4 ELSE 0 END, true,
              CASE WHEN has_session THEN 4 ELSE 1 END
       FROM bench_others`
    )
    await client.query(
      `INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
                                   spent_after_usd, available_after_usd)
       SELECT wallet_id, 1, 'budget_set', 100, 100, 0, 0, 100 FROM bench_others`
    )
    await client.query(
      `INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
                                   spent_after_usd, available_after_usd, session_id)
       SELECT o.wallet_id, s.sequence, s.kind::ledger_entry_kind, s.amount, 100, s.reserved, s.spent,
              100 - s.reserved - s.spent, 'history-' || o.g
       FROM bench_others o
       CROSS JOIN (VALUES (2, 'reserve', 1.0, 1.0, 0.0), (3, 'spend', 0.4, 0.6, 0.4),
                          (4, 'reserve_release', 0.6, 0.0, 0.4)) AS s (sequence, kind, amount, reserved, spent)
       WHERE o.has_session`
    )
    await client.query(
      `INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, state, expires_at)
       SELECT wallet_id, 'history-' || g, 0, 0.4, 'released', now() - interval '1 day'
       FROM bench_others WHERE has_session`
    )
    await client.query(
      `INSERT INTO settlement_records (wallet_id, idempotency_key, kind, session_id, outcome)
       SELECT o.wallet_id, 'history-' || o.g || '-' || r.kind, r.kind, 'history-' || o.g, 'applied'
       FROM bench_others o CROSS JOIN (VALUES ('reserve'), ('spend'), ('release')) AS r (kind)
       WHERE o.has_session`
    )
    await client.query("COMMIT")
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined)
    throw error
  }
  await client.query("ANALYZE")
}

/**
 * Whether the cost of a job grows with the accounts (the issue "Settlement whose cost does not
 * grow with the accounts"): the 100-wallet workload, plain (no limits, thresholds or endpoints),
 * on two databases of their own, one with 100 other accounts and one with 100,000
 * (`loadOtherAccounts`), each with a worker of its own, round by round.
 * `settlement_cpu_at_100k_accounts_vs_100` is the worker's and PostgreSQL's CPU per job together
 * on the large side over the small side's, paired round by round (target ≤ 1.1).
 */
const measureScale = async (bench: Bench): Promise<SuiteResult> => {
  const { progress, settings } = bench
  const size = roundSize(settings, EVENT_ROUND_SHARE)
  const opened: Array<() => Promise<void>> = []
  try {
    const sides = []
    for (const others of SCALE_OTHERS) {
      const databaseUrl = await bench.createDatabase()
      await migrate(databaseUrl)
      const client = await openClient({ connectionString: databaseUrl, application_name: "bench scale" })
      opened.push(() => endQuietly(client))
      await enableStatistics(client)
      const begun = performance.now()
      await loadOtherAccounts(client, others)
      progress(
        `settlement scale: ${others.toLocaleString("en-US")} other accounts loaded in ${
          ((performance.now() - begun) / 1000).toFixed(1)
        } s`
      )
      const worker = await bench.startWorkerOn(databaseUrl)
      opened.push(() => worker.stop())
      const runtime = makeRuntime(databaseUrl, worker.redisPrefix)
      opened.push(() => runtime.dispose())
      const producer = await openProducer(worker.redisPrefix)
      opened.push(() => producer.close())
      const served = await createAccounts(runtime, `scale ${others}`, SCALE_WALLETS)
      const accountIds = served.map((s) => s.account.id)
      const walletIds = served.map((s) => s.walletId)
      const cyclesByWallet = new Map(walletIds.map((id) => [id, 0]))
      let round = 0
      const runner: Runner = {
        name: `worker, ${others.toLocaleString("en-US")} other accounts`,
        round: async () => {
          const cpuBefore = worker.cpuSeconds()
          const postgresCpu = postgresCpuFrom()
          const database = await databaseFiguresFrom(client)
          const run = await runWorkerCycles(producer, accountIds, size, `scale-${others}-r${++round}`)
          const cpuAfter = worker.cpuSeconds()
          countCycles(cyclesByWallet, walletIds, run.cycles)
          const measured = figures(
            run.jobsPerSecond,
            run.latencies,
            cpuBefore === undefined || cpuAfter === undefined
              ? undefined
              : ((cpuAfter - cpuBefore) * 1e6) / run.latencies.length,
            undefined,
            postgresCpu(run.latencies.length)
          )
          return { ...measured, ...(await database(run.latencies.length)) }
        }
      }
      const warm = async () => {
        const warmed = await runWorkerCycles(producer, accountIds, warmUpSize(settings), `scale-${others}-warm`)
        countCycles(cyclesByWallet, walletIds, warmed.cycles)
      }
      sides.push({ others, client, worker, runner, warm, cyclesByWallet })
    }
    const [small, large] = sides
    if (small === undefined || large === undefined) throw new Error("scale: no sides")
    progress("settlement scale: warming up")
    for (const side of sides) await side.warm()
    const request = "reserve+spend+release, 100 wallets, no limits or events"
    const build = (rounds: ReadonlyMap<string, ReadonlyArray<RoundFigures>>): SuiteResult => {
      const result = roundsSoFar(small.runner.name, request)(rounds)
      const ofSmall = rounds.get(small.runner.name) ?? []
      const ofLarge = rounds.get(large.runner.name) ?? []
      const n = Math.min(ofSmall.length, ofLarge.length)
      const stack = n === 0
        ? undefined
        : pairedRatioOf(ofLarge.slice(0, n), ofSmall.slice(0, n), "worker + postgres CPU", stackCpuUsPerRequest)
      return {
        rows: result.rows.map((row) => ({
          ...row,
          parameters: {
            ...row.parameters,
            wallets: SCALE_WALLETS,
            round_seconds: size.seconds,
            ...(row.server === large.runner.name && stack !== undefined
              ? { worker_and_postgres_cpu_vs_100: stack.median }
              : {})
          }
        })),
        ratios: stack === undefined ? {} : { settlement_cpu_at_100k_accounts_vs_100: stack.median }
      }
    }
    const rounds = await compareRounds([large.runner, small.runner], {
      connections: CONCURRENCY,
      durationSeconds: settings.durationSeconds,
      rounds: settings.rounds,
      onRound: keepEachRound(
        bench,
        "scale",
        build,
        (name, index, f) => progress(`settlement scale round ${index} ${name}: ${roundLine(f)}`)
      )
    })
    for (const side of sides) {
      await checkQueue(side.worker.redisPrefix)
      await checkWallets(side.client, side.cyclesByWallet, side.runner.name)
      await checkSettlement(side.client, side.cyclesByWallet)
    }
    progress("settlement scale: books check out")
    const result = build(rounds)
    bench.kept.add(result, "scale")
    return result
  } finally {
    for (const close of opened.reverse()) await close().catch(() => undefined)
  }
}

/**
 * Jobs per second (three per cycle) and enqueue → result latency through the
 * real worker, beside the pg ceiling at the same concurrency. The figures are
 * per job for the worker and per movement for the ceiling: one job is one
 * movement.
 */
export const settlementSuite: Suite = {
  name: "settlement",
  /**
   * The hot scenario's four contenders (the second worker's start and its counts' publication,
   * ~8 s a round, beside its round), the spread scenario's three; then at half length the events
   * comparison's three sides, the fleet controls' two, the grants' two and the scale comparison's two; the relay
   * and its baseline; and set-up: accounts, warm-ups, 100,000 accounts loaded.
   */
  plannedSeconds: (settings) =>
    settings.rounds * (settings.durationSeconds * (4 + 3 + (3 + 2 + 2 + 2) * EVENT_ROUND_SHARE) + 8 + 6 + 10) +
    14 * settings.warmUpSeconds + 110,
  run: async (bench) => {
    // Every scenario's accounts have webhook endpoints: the relay and the deliveries run beside the worker.
    const webhooks = await bench.webhooks()
    const runtime = makeRuntime(bench.stack.databaseUrl, bench.worker.redisPrefix)
    const producer = await openProducer(bench.worker.redisPrefix)
    const noopProducer = await openProducer(bench.noopWorker.redisPrefix)
    const ceiling = await openCeiling(bench.stack.databaseUrl, CONCURRENCY)
    const client = await openClient({ connectionString: bench.stack.databaseUrl, application_name: "bench settlement" })
    const receiver = await openReceiver()
    try {
      const statistics = await enableStatistics(client)
      if (!statistics.statements) {
        bench.progress(
          "settlement: no pg_stat_statements on this server (it needs shared_preload_libraries): no planning share"
        )
      }
      if (!statistics.wal) bench.progress("settlement: no pg_walinspect on this server: no rows written per job")
      const rows: Array<Row> = []
      const ratios: Record<string, number> = {}
      const keep = (result: SuiteResult) => {
        rows.push(...result.rows)
        Object.assign(ratios, result.ratios)
      }
      const runs = (part: string) => bench.settings.parts?.has(part) ?? true
      for (const scenario of scenarios.filter((scenario) => runs(scenario.key))) {
        keep(
          await measureScenario(
            bench,
            runtime,
            producer,
            noopProducer,
            ceiling,
            client,
            receiver,
            webhooks,
            scenario
          )
        )
      }
      // The worse of the two: jobs/s over what BullMQ itself allows (issue 29's target ≥ 0.6).
      const vsNoop = scenarios.map((scenario) => ratios[`settlement_${scenario.key}_vs_noop_throughput`])
        .filter((ratio) => ratio !== undefined)
      if (vsNoop.length > 0) ratios.settlement_vs_noop_throughput = Math.min(...vsNoop)
      bench.kept.ratio("settlement_vs_noop_throughput", ratios.settlement_vs_noop_throughput)
      if (runs("events")) keep(await measureAlerts(bench, runtime, producer, client, receiver, webhooks))
      if (runs("relay")) keep(await measureRelay(bench, runtime, client, receiver, webhooks))
      if (runs("fleet")) keep(await measureFleetControls(bench, runtime, producer, client))
      if (runs("grants")) keep(await measureGrants(bench, runtime, producer, client))
      if (runs("governance")) keep(await measureGovernance(bench, runtime, producer, client))
      if (runs("scale")) keep(await measureScale(bench))
      bench.progress(`settlement webhooks: ${receiver.deliveries()} deliveries received in all`)
      return { rows, ratios }
    } finally {
      await receiver.close()
      await endQuietly(client)
      await ceiling.close()
      await producer.close()
      await noopProducer.close()
      await runtime.dispose()
    }
  }
}
