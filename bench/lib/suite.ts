import type { RowKeeper } from "./keeper.js"
import type { RoundFigures } from "./load.js"
import type { PrivatePostgres } from "./postgres.js"
import type { Stack } from "./service.js"
import type { Stat } from "./stats.js"
import type { WorkerProcess } from "./worker.js"

export interface RunSettings {
  readonly durationSeconds: number
  readonly rounds: number
  /** Load before the first measured round, so both servers are JIT-compiled and their pools full. */
  readonly warmUpSeconds: number
  /** `--parts`: the parts of a suite to run (the settlement suite's scenarios and comparisons); all when undefined. */
  readonly parts?: ReadonlySet<string> | undefined
}

/** What every suite gets: the running servers, the settings, and a place for progress lines. */
export interface Bench {
  readonly stack: Stack
  /** The settlement worker (`workers/settlement.ts`) on the stack's database, with a Redis prefix of its own. */
  readonly worker: WorkerProcess
  /** Starts another settlement worker on the first one's database and queue; the caller stops it. */
  readonly startSecondWorker: () => Promise<WorkerProcess>
  /**
   * The webhooks process (`workers/webhooks.ts`) on the worker's database and Redis prefix, started
   * by the first suite that asks for it (one whose scenarios have webhook endpoints), the same
   * process after: the other suites run without it.
   */
  readonly webhooks: () => Promise<WorkerProcess>
  /** A BullMQ worker with the same queue settings whose processor returns at once: the floor under a job. */
  readonly noopWorker: WorkerProcess
  readonly settings: RunSettings
  readonly progress: (line: string) => void
  /**
   * The figures the suite has so far, each call all of them: what a run stopped at its time
   * limit in the middle of the suite reports. (`kept` is the same, row by row.)
   */
  readonly soFar: (result: SuiteResult) => void
  /**
   * Where the suite keeps each row and ratio as soon as it is measured (a row of the rounds so
   * far is replaced by the row of more): a run stopped at its limit reports everything kept.
   */
  readonly kept: RowKeeper
  /** The run's own PostgreSQL server, when it has one (statement statistics, a second database). */
  readonly postgres: PrivatePostgres | undefined
  /** A new database on the run's server, dropped at the end of the run; the caller migrates it. */
  readonly createDatabase: () => Promise<string>
  /** Starts a settlement worker on another database and Redis prefix of its own; the caller stops it. */
  readonly startWorkerOn: (databaseUrl: string) => Promise<WorkerProcess>
  /** Seconds left before the run's limit: a suite may shorten what it still has to do. */
  readonly secondsLeft: () => number
}

/** One line of the table: one server, one request, one concurrency. */
export interface Row {
  readonly suite: string
  /** What was asked, e.g. `GET /auth/me`. */
  readonly request: string
  /** Which server (or in-process reference) answered. */
  readonly server: string
  readonly connections: number
  readonly rps: Stat
  readonly p50_ms: Stat
  readonly p99_ms: Stat
  /** The server's CPU time per request (user + system), when it could be read. */
  readonly cpu_us_per_request?: Stat
  /** The webhooks process's CPU time per delivery it made meanwhile, for rows whose work caused deliveries. */
  readonly webhooks_cpu_us_per_delivery?: Stat
  /** PostgreSQL's CPU time per request (every process of the server), for rows that measure it. */
  readonly postgres_cpu_us_per_request?: Stat
  /** Planning's share of PostgreSQL's statement time (`pg_stat_statements`), settlement rows. */
  readonly planning_share?: Stat
  /** Heap rows written per job, from the WAL (settlement rows). */
  readonly rows_written_per_job?: Stat
  /** B-tree entries written per job, from the WAL (settlement rows). */
  readonly index_entries_per_job?: Stat
  /** Wallets read and decided again per job (the `2 workers` row). */
  readonly wallet_rereads_per_job?: Stat
  /** Against the reference measured beside it: round-by-round ratios, summarised. */
  readonly vs?: {
    readonly reference: string
    readonly rps: Stat
    readonly p99: Stat
  }
  /** Settings that bound the figure (argon2id cost, …), recorded with it. */
  readonly parameters?: Readonly<Record<string, string | number>>
  readonly rounds: ReadonlyArray<RoundFigures>
}

export interface SuiteResult {
  readonly rows: ReadonlyArray<Row>
  /** Headline comparisons, as plain numbers (the median of the round-by-round ratios). */
  readonly ratios: Readonly<Record<string, number>>
}

/** A benchmark: add one to `bench/run.ts`'s list and it runs, prints and is recorded. */
export interface Suite {
  readonly name: string
  readonly run: (bench: Bench) => Promise<SuiteResult>
  /**
   * About how long the suite takes with these settings, on a machine as slow as the slowest it was
   * run on (its rounds' time, warm-ups and set-up): the run's default limit follows the sum.
   */
  readonly plannedSeconds: (settings: RunSettings) => number
}
