import { mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { dirname, resolve } from "node:path"
import { parseArgs } from "node:util"
import { ensureBuilt } from "../scripts/programs.mjs"
import { Cleanup } from "./lib/cleanup.js"
import { startStack } from "./lib/service.js"
import { round } from "./lib/stats.js"
import type { Row, RunSettings, Suite } from "./lib/suite.js"
import { renderTable } from "./lib/table.js"
import { startNoopWorker, startSettlementWorker } from "./lib/worker.js"
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
 *   --cpu-prof     the API and the worker write V8 CPU profiles into bench/results/ when they stop
 *
 * Only a full run (every suite, at least three rounds) writes latest.json unless
 * --out says otherwise, so a quick partial run never replaces the recorded figures.
 */

// The ledger suite loads a million rows, so it runs last, where they cannot slow the others.
const suites: ReadonlyArray<Suite> = [httpSuite, loginSuite, settlementSuite, ledgerSuite]

/** The bound for the whole run; past it the run stops and cleans up. */
const RUN_LIMIT_MS = 10 * 60 * 1000
const RESULTS_DIR = "bench/results"

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "5" },
    rounds: { type: "string", default: "3" },
    only: { type: "string" },
    out: { type: "string" },
    "cpu-prof": { type: "boolean", default: false }
  }
})

const settings: RunSettings = {
  durationSeconds: Number(args.duration),
  rounds: Number(args.rounds),
  warmUpSeconds: 4
}
if (!(settings.durationSeconds > 0) || !Number.isInteger(settings.rounds) || settings.rounds < 1) {
  throw new Error("--duration must be positive and --rounds a positive integer")
}
const chosen = args.only === undefined ? suites : suites.filter((suite) => args.only?.split(",").includes(suite.name))
if (chosen.length === 0) {
  throw new Error(`no suite named ${args.only}; there are ${suites.map((s) => s.name).join(", ")}`)
}
const complete = chosen.length === suites.length && settings.rounds >= 3
const out = args.out ?? (complete ? `${RESULTS_DIR}/latest.json` : undefined)

const progress = (line: string) => process.stderr.write(`${line}\n`)
/** The processes under test, whose last output a failed run shows: a 5xx is explained there. */
const underTest: Array<{ readonly name: string; readonly recentOutput: () => string }> = []
const cleanup = new Cleanup()

const abort = (reason: string, code: number) => {
  progress(reason)
  void cleanup.runAll().finally(() => process.exit(code))
}
// A crash (a closed stdout, a bug in a suite) must not leave a database or a server behind either.
process.once("uncaughtException", (error) => abort(`bench crashed: ${error.stack ?? error.message}`, 1))
process.once("unhandledRejection", (reason) => abort(`bench crashed: ${String(reason)}`, 1))
process.once("SIGINT", () => abort("interrupted; cleaning up", 130))
process.once("SIGTERM", () => abort("terminated; cleaning up", 143))
setTimeout(() => abort(`the run took longer than ${RUN_LIMIT_MS / 60_000} minutes; stopping`, 1), RUN_LIMIT_MS).unref()

const main = async () => {
  const started = Date.now()
  // `npm run bench` has compiled already; a direct `tsx bench/run.ts` must not measure stale output.
  ensureBuilt(progress)
  // Other work on the machine moves absolute figures; the side-by-side ratios hold up better.
  const loadAtStart = loadavg()[0] ?? 0
  if (loadAtStart > availableParallelism() / 2) {
    progress(
      `load average ${
        loadAtStart.toFixed(1)
      } on ${availableParallelism()} CPUs: absolute figures will be low; read the ratios`
    )
  }
  const stack = await startStack(cleanup, {
    cpuProfileDir: args["cpu-prof"] ? resolve(RESULTS_DIR) : undefined
  })
  underTest.push(stack.api, stack.baseline)
  const worker = await startSettlementWorker({
    databaseUrl: stack.databaseUrl,
    cleanup,
    // The settlement suite's receiver listens on loopback over http: allowed here as in development (D17).
    env: { WEBHOOK_ALLOW_INSECURE: "true" },
    nodeArgs: args["cpu-prof"] ? ["--cpu-prof", "--cpu-prof-dir", resolve(RESULTS_DIR)] : []
  })
  const noopWorker = await startNoopWorker({ databaseUrl: stack.databaseUrl, cleanup })
  underTest.push(worker, noopWorker)
  // Profiles are named CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile; thread 0 is the program itself.
  if (args["cpu-prof"]) progress(`profiling: api pid ${stack.api.pid}, worker pid ${worker.pid}`)
  const rows: Array<Row> = []
  const ratios: Record<string, number> = {}
  for (const suite of chosen) {
    progress(`suite ${suite.name}`)
    const result = await suite.run({ stack, worker, noopWorker, settings, progress })
    rows.push(...result.rows)
    Object.assign(ratios, result.ratios)
  }
  const rssMb = (mb: number | undefined) => (mb === undefined ? null : round(mb, 1))
  const rss_mb = {
    api: rssMb(stack.api.peakRssMb()),
    baseline: rssMb(stack.baseline.peakRssMb()),
    worker: rssMb(worker.peakRssMb())
  }
  await cleanup.runAll()

  const table = renderTable(rows)
  process.stdout.write(
    `${table}\n\npeak RSS (MB): api ${rss_mb.api ?? "n/a"}, baseline ${rss_mb.baseline ?? "n/a"}, worker ${
      rss_mb.worker ?? "n/a"
    }\n`
  )
  progress(`run took ${Math.round((Date.now() - started) / 1000)} s`)
  if (out !== undefined) {
    const report = {
      generated_at: new Date().toISOString(),
      machine: {
        cpus: availableParallelism(),
        cpu_model: cpus()[0]?.model ?? "unknown",
        node: process.version,
        load_average_at_start: loadAtStart
      },
      settings: {
        duration_seconds: settings.durationSeconds,
        rounds: settings.rounds,
        warm_up_seconds: settings.warmUpSeconds
      },
      results: rows,
      ratios,
      rss_mb
    }
    mkdirSync(dirname(out), { recursive: true })
    // Three decimals are more than the rounds' spread justifies.
    const rounded = (_key: string, value: unknown) =>
      typeof value === "number" && !Number.isInteger(value) ? round(value, 3) : value
    writeFileSync(out, `${JSON.stringify(report, rounded, 2)}\n`)
    progress(`wrote ${out}`)
  }
}

main().catch((error: unknown) => {
  for (const program of underTest) {
    const output = program.recentOutput().trim()
    if (output !== "") progress(`${program.name}'s last output:\n${output}`)
  }
  abort(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`, 1)
})
