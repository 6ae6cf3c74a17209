import { mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { dirname, resolve } from "node:path"
import { parseArgs } from "node:util"
import { ensureBuilt } from "../scripts/programs.mjs"
import { countPostgresOf } from "./lib/child.js"
import { Cleanup } from "./lib/cleanup.js"
import { RowKeeper } from "./lib/keeper.js"
import { type PrivatePostgres, startPrivatePostgres } from "./lib/postgres.js"
import { startStack } from "./lib/service.js"
import { round } from "./lib/stats.js"
import { createDatabase, useServer } from "./lib/stores.js"
import type { Row, RunSettings, Suite } from "./lib/suite.js"
import { renderRatios, renderTable } from "./lib/table.js"
import { startNoopWorker, startSettlementWorker, startWebhooksProcess, type WorkerProcess } from "./lib/worker.js"
import { httpSuite } from "./suites/http.js"
import { ledgerSuite } from "./suites/ledger.js"
import { loginSuite } from "./suites/login.js"
import { settlementSuite } from "./suites/settlement.js"

/**
 * `npm run bench`: starts the service and the baseline on a fresh database,
 * runs every suite, prints one table and writes `bench/results/latest.json`.
 *
 *   --duration S   seconds per round (5)       --rounds N    rounds per figure (3)
 *   --only a,b     some suites only             --out FILE    where to write the figures
 *   --parts a,b    some parts of a suite only (settlement: hot, spread, events, relay, fleet, grants, governance, scale)
 *   --limit S      seconds the whole run may take (by default 600, the issue's ten minutes, or
 *                  one and a half times what the suites plan for these settings if that is more)
 *   --cpu-prof     the API, the worker and the webhooks process write V8 CPU profiles into
 *                  bench/results/ when they stop
 *   --shared-postgres  the databases on the machine's PostgreSQL (DATABASE_URL) rather than on
 *                  a server of the run's own (no planning share then)
 *
 * The run starts a PostgreSQL server of its own (bench/lib/postgres.ts) with the machine's
 * server's settings and pg_stat_statements loaded, and counts that server's CPU alone.
 *
 * Only a full run (every suite, at least three rounds) writes latest.json unless
 * --out says otherwise, so a quick partial run never replaces the recorded figures.
 *
 * A run that reaches its limit (a loaded machine) stops there: it says how far it got, prints
 * and writes the figures of the suites it finished, marked `partial`, and exits 1, since what it
 * was asked to measure was not all measured.
 */

// The ledger suite loads a million rows, so it runs last, where they cannot slow the others.
const suites: ReadonlyArray<Suite> = [httpSuite, loginSuite, settlementSuite, ledgerSuite]

const RESULTS_DIR = "bench/results"

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "5" },
    rounds: { type: "string", default: "3" },
    only: { type: "string" },
    parts: { type: "string" },
    out: { type: "string" },
    // The issue's bound for the whole run; past it the run stops, reports what it has and cleans up.
    limit: { type: "string" },
    "cpu-prof": { type: "boolean", default: false },
    "shared-postgres": { type: "boolean", default: false }
  }
})

const settings: RunSettings = {
  durationSeconds: Number(args.duration),
  rounds: Number(args.rounds),
  warmUpSeconds: 4,
  parts: args.parts === undefined ? undefined : new Set(args.parts.split(","))
}
const chosen = args.only === undefined
  ? suites
  : suites.filter((suite) => args.only?.split(",").includes(suite.name))
/** What the chosen suites plan for these settings, and the server's start and the build. */
const plannedSeconds = Math.round(chosen.reduce((sum, suite) => sum + suite.plannedSeconds(settings), 20))
/** The issue's ten minutes, unless what the run must do plans for more: then half as much again. */
const DEFAULT_LIMIT_SECONDS = 600
const limitSeconds = args.limit === undefined
  ? Math.max(DEFAULT_LIMIT_SECONDS, Math.ceil(plannedSeconds * 1.5))
  : Number(args.limit)
if (
  !(settings.durationSeconds > 0) || !Number.isInteger(settings.rounds) || settings.rounds < 1 || !(limitSeconds > 0)
) {
  throw new Error("--duration and --limit must be positive and --rounds a positive integer")
}
if (chosen.length === 0) {
  throw new Error(`no suite named ${args.only}; there are ${suites.map((s) => s.name).join(", ")}`)
}
const complete = chosen.length === suites.length && settings.rounds >= 3 && settings.parts === undefined
const out = args.out ?? (complete ? `${RESULTS_DIR}/latest.json` : undefined)

/** How far the run has got, and what it has measured: what a run stopped at its limit reports. */
interface Reached {
  readonly rows: Array<Row>
  readonly ratios: Record<string, number>
  readonly finished: Array<string>
  running: string | undefined
  /** The running suite's figures so far, row by row as it measured them. */
  runningKept: RowKeeper | undefined
  lastProgress: string
  peakRss: () => Record<string, number | null>
}
const reached: Reached = {
  rows: [],
  ratios: {},
  finished: [],
  running: undefined,
  runningKept: undefined,
  lastProgress: "",
  peakRss: () => ({})
}
const progress = (line: string) => {
  reached.lastProgress = line
  process.stderr.write(`${line}\n`)
}
/** The processes under test, whose last output a failed run shows: a 5xx is explained there. */
const underTest: Array<{ readonly name: string; readonly recentOutput: () => string }> = []
const cleanup = new Cleanup()

/** Set by the first reason to stop: what fails after it (a suite whose servers are going) is its consequence. */
let aborting = false
const abort = (reason: string, code: number) => {
  if (aborting) return
  aborting = true
  progress(reason)
  void cleanup.runAll().finally(() => process.exit(code))
}
// A crash (a closed stdout, a bug in a suite) must not leave a database or a server behind either.
// Once stopping, what fails (a suite's connection cut off by the clean-up) is only said: a second
// uncaught error must not kill the process before its clean-up has ended.
const crashed = (what: string) => {
  if (aborting) progress(`while stopping: ${what}`)
  else abort(`bench crashed: ${what}`, 1)
}
process.on("uncaughtException", (error) => crashed(error.stack ?? error.message))
process.on(
  "unhandledRejection",
  (reason) => crashed(reason instanceof Error ? reason.stack ?? reason.message : String(reason))
)
process.once("SIGINT", () => abort("interrupted; cleaning up", 130))
process.once("SIGTERM", () => abort("terminated; cleaning up", 143))

/** What a run stopped at its limit says of itself, in its table and its figures. */
interface PartialRun {
  readonly reason: string
  readonly suites_finished: ReadonlyArray<string>
  readonly stopped_in: string | null
  /** Rows of the suite it stopped in that were measured before it stopped, kept with the others. */
  readonly stopped_in_rows: number
  readonly last_progress: string
  readonly suites_not_run: ReadonlyArray<string>
}

/** The load averages over 1, 5 and 15 minutes, as the table and the figures show them. */
const loadAverages = () => loadavg().map((value) => round(value, 2))

/** Prints the table of what was measured and writes it to `out` (when the run writes one). */
const report = (started: number, loadAtStart: ReadonlyArray<number>, partial?: PartialRun) => {
  const rss_mb = reached.peakRss()
  const loadAtEnd = loadAverages()
  const table = renderTable(reached.rows)
  const rss = Object.entries(rss_mb).map(([name, mb]) => `${name} ${mb ?? "n/a"}`).join(", ")
  const ratios = renderRatios(reached.ratios)
  const seconds = Math.round((Date.now() - started) / 1000)
  process.stdout.write(
    `${
      partial === undefined ?
        "" :
        `PARTIAL (${partial.reason}): the figures of ${partial.suites_finished.join(", ") || "no suite"} only${
          partial.stopped_in === null ? "" : `, and ${partial.stopped_in_rows} rows of ${partial.stopped_in}`
        }\n\n`
    }load average (1, 5, 15 min) at the start ${loadAtStart.join(", ")}; at the end ${loadAtEnd.join(", ")}; ` +
      `${availableParallelism()} CPUs; ${seconds} s of a limit of ${limitSeconds} s (planned ${plannedSeconds} s)\n\n` +
      `${table}\n\n${ratios === "" ? "" : `${ratios}\n\n`}peak RSS (MB): ${rss}\n`
  )
  progress(`run took ${seconds} s`)
  if (out === undefined) return
  const figures = {
    generated_at: new Date().toISOString(),
    ...(partial === undefined ? {} : { partial }),
    machine: {
      cpus: availableParallelism(),
      cpu_model: cpus()[0]?.model ?? "unknown",
      node: process.version,
      // The 1-minute figure, as before; the three of each beside it.
      load_average_at_start: loadAtStart[0] ?? null,
      load_average_at_end: loadAtEnd[0] ?? null,
      load_averages_at_start: loadAtStart,
      load_averages_at_end: loadAtEnd,
      postgres: privateServer === undefined
        ? "the machine's server"
        : `the run's own (settings copied: ${privateServer.copied.join(", ") || "none"})`
    },
    settings: {
      duration_seconds: settings.durationSeconds,
      rounds: settings.rounds,
      warm_up_seconds: settings.warmUpSeconds,
      limit_seconds: limitSeconds,
      planned_seconds: plannedSeconds,
      took_seconds: seconds
    },
    results: reached.rows,
    ratios: reached.ratios,
    rss_mb
  }
  mkdirSync(dirname(out), { recursive: true })
  // Three decimals are more than the rounds' spread justifies.
  const rounded = (_key: string, value: unknown) =>
    typeof value === "number" && !Number.isInteger(value) ? round(value, 3) : value
  writeFileSync(out, `${JSON.stringify(figures, rounded, 2)}\n`)
  progress(`wrote ${out}${partial === undefined ? "" : " (partial)"}`)
}

const started = Date.now()
// Other work on the machine moves absolute figures; the side-by-side ratios hold up better.
const loadAtStart = loadAverages()
let privateServer: PrivatePostgres | undefined

setTimeout(() => {
  const stoppedIn = reached.runningKept?.result() ?? { rows: [], ratios: {} }
  reached.rows.push(...stoppedIn.rows)
  Object.assign(reached.ratios, stoppedIn.ratios)
  const partial: PartialRun = {
    reason: `the run reached its limit of ${limitSeconds} s`,
    suites_finished: reached.finished,
    stopped_in: reached.running ?? null,
    stopped_in_rows: stoppedIn.rows.length,
    last_progress: reached.lastProgress,
    suites_not_run: chosen.map((suite) => suite.name).filter((name) =>
      !reached.finished.includes(name) && name !== reached.running
    )
  }
  progress(
    `${partial.reason}, in ${partial.stopped_in === null ? "its set-up" : `suite ${partial.stopped_in}`} ` +
      `(its last line: "${partial.last_progress}"); finished: ${partial.suites_finished.join(", ") || "none"}; ` +
      `not run: ${partial.suites_not_run.join(", ") || "none"}`
  )
  report(started, loadAtStart, partial)
  abort("stopping; cleaning up", 1)
}, limitSeconds * 1000).unref()

const main = async () => {
  // `npm run bench` has compiled already; a direct `tsx bench/run.ts` must not measure stale output.
  ensureBuilt(progress)
  const load = loadAtStart[0] ?? 0
  if (load > availableParallelism() / 2) {
    progress(
      `load average ${load.toFixed(1)} on ${availableParallelism()} CPUs: absolute figures will be low; read the ratios`
    )
  }
  progress(`planned ${plannedSeconds} s; the run stops at ${limitSeconds} s`)
  if (!args["shared-postgres"]) {
    privateServer = await startPrivatePostgres(
      cleanup,
      process.env.DATABASE_URL ?? "postgres://localhost:5432/account_api",
      progress
    )
    if (privateServer === undefined) progress("no PostgreSQL binaries: the run uses the machine's server")
    else {
      useServer(privateServer.url)
      countPostgresOf(privateServer.pid)
    }
  }
  const stack = await startStack(cleanup, {
    cpuProfileDir: args["cpu-prof"] ? resolve(RESULTS_DIR) : undefined
  })
  underTest.push(stack.api, stack.baseline)
  const profiled = args["cpu-prof"] ? ["--cpu-prof", "--cpu-prof-dir", resolve(RESULTS_DIR)] : []
  const worker = await startSettlementWorker({ databaseUrl: stack.databaseUrl, cleanup, nodeArgs: profiled })
  const noopWorker = await startNoopWorker({ databaseUrl: stack.databaseUrl, cleanup })
  underTest.push(worker, noopWorker)
  // Started for the first suite with webhook endpoints, so the others run without its relay.
  let webhooksProcess: Promise<WorkerProcess> | undefined
  let webhooksStarted: WorkerProcess | undefined
  const webhooks = () =>
    webhooksProcess ??= startWebhooksProcess({
      databaseUrl: stack.databaseUrl,
      cleanup,
      redisPrefix: worker.redisPrefix,
      // The settlement suite's receiver listens on loopback over http: allowed here as in development (D17).
      env: { WEBHOOK_ALLOW_INSECURE: "true" },
      nodeArgs: profiled
    }).then((started) => {
      webhooksStarted = started
      underTest.push(started)
      if (args["cpu-prof"]) progress(`profiling: webhooks pid ${started.pid}`)
      return started
    })
  const rssMb = (mb: number | undefined) => (mb === undefined ? null : round(mb, 1))
  reached.peakRss = () => ({
    api: rssMb(stack.api.peakRssMb()),
    baseline: rssMb(stack.baseline.peakRssMb()),
    worker: rssMb(worker.peakRssMb()),
    ...(webhooksStarted === undefined ? {} : { webhooks: rssMb(webhooksStarted.peakRssMb()) })
  })
  // Profiles are named CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile; thread 0 is the program itself.
  if (args["cpu-prof"]) progress(`profiling: api pid ${stack.api.pid}, worker pid ${worker.pid}`)
  for (const suite of chosen) {
    reached.running = suite.name
    progress(`suite ${suite.name}`)
    const kept = new RowKeeper()
    reached.runningKept = kept
    const startSecondWorker = () =>
      startSettlementWorker({ databaseUrl: stack.databaseUrl, cleanup, redisPrefix: worker.redisPrefix })
    const result = await suite.run({
      stack,
      worker,
      startSecondWorker,
      webhooks,
      noopWorker,
      settings,
      progress,
      soFar: (soFar) => kept.all(soFar),
      kept,
      postgres: privateServer,
      createDatabase: () => createDatabase(cleanup),
      startWorkerOn: (databaseUrl) => startSettlementWorker({ databaseUrl, cleanup }),
      secondsLeft: () => limitSeconds - (Date.now() - started) / 1000
    })
    reached.runningKept = undefined
    reached.rows.push(...result.rows)
    Object.assign(reached.ratios, result.ratios)
    reached.finished.push(suite.name)
  }
  reached.running = undefined
  const peak = reached.peakRss()
  reached.peakRss = () => peak // read before the processes stop
  await cleanup.runAll()
  report(started, loadAtStart)
}

main().catch((error: unknown) => {
  if (aborting) return
  for (const program of underTest) {
    const output = program.recentOutput().trim()
    if (output !== "") progress(`${program.name}'s last output:\n${output}`)
  }
  abort(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`, 1)
})
