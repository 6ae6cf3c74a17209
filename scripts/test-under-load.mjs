// `npm run test:under-load`: the README's `npm test`, run several times back to back with a
// process burning one core beside it, so that a test that passes only on a quiet machine is found
// here before CI finds it (docs/development.md, "Tests under load").
//
//   npm run test:under-load                 three runs, one busy core
//   npm run test:under-load -- --runs 1 --burners 0 [-- vitest args]
//
// Each run is `npm test` as a person types it, in this shell's environment; its output goes to
// .data/test-under-load/run-N.log and vitest's JSON report beside it. At the end: one line per
// run (status, wall time, load average at its start and end) and the ten slowest files of each.
// Exits 0 only when every run passed. Only Node built-ins are imported.
import { spawn } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { ROOT } from "./programs.mjs"

const OUT = path.join(ROOT, ".data", "test-under-load")
const log = (message) => process.stderr.write(`[test-under-load] ${message}\n`)

const parseArgs = (argv) => {
  const options = { runs: 3, burners: 1, vitest: [] }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === "--") {
      options.vitest = argv.slice(i + 1)
      break
    }
    const value = Number(argv[i + 1])
    if ((arg === "--runs" || arg === "--burners") && Number.isInteger(value) && value >= 0) {
      options[arg.slice(2)] = value
      i++
    } else {
      throw new Error(`unknown argument ${arg}; usage: --runs N --burners N [-- vitest args]`)
    }
  }
  return options
}

/** One process spinning on a core until it is killed: the load a busy neighbour makes. */
const startBurner = () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore", detached: false })

const loadAverage = () => os.loadavg()[0].toFixed(2)

/** `npm test` with this shell's environment; resolves to its exit status and wall time. */
const runOnce = (index, vitestArgs) =>
  new Promise((resolve) => {
    const report = path.join(OUT, `run-${index}.json`)
    const logFile = path.join(OUT, `run-${index}.log`)
    const args = ["test", "--", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...vitestArgs]
    const started = Date.now()
    const loadAtStart = loadAverage()
    let output = ""
    const child = spawn("npm", args, { cwd: ROOT, env: process.env, stdio: ["ignore", "pipe", "pipe"] })
    const keep = (chunk) => {
      output += chunk.toString("utf8")
      process.stderr.write(chunk)
    }
    child.stdout.on("data", keep)
    child.stderr.on("data", keep)
    child.once("exit", (code, signal) => {
      writeFileSync(logFile, output)
      resolve({
        index,
        status: code ?? 128 + (os.constants.signals[signal] ?? 0),
        seconds: (Date.now() - started) / 1000,
        loadAtStart,
        loadAtEnd: loadAverage(),
        slowest: slowestFiles(report),
        failed: failedFiles(report)
      })
    })
  })

const readReport = (file) => {
  try {
    return JSON.parse(readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
}

const relative = (file) => path.relative(ROOT, file)

/** The ten files that took longest, from vitest's JSON report (start to end of each file). */
const slowestFiles = (file) =>
  (readReport(file)?.testResults ?? [])
    .map((result) => ({ file: relative(result.name), seconds: (result.endTime - result.startTime) / 1000 }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, 10)

const failedFiles = (file) =>
  (readReport(file)?.testResults ?? []).filter((result) => result.status !== "passed").map((result) =>
    relative(result.name)
  )

const main = async () => {
  const options = parseArgs(process.argv.slice(2))
  mkdirSync(OUT, { recursive: true })
  const burners = Array.from({ length: options.burners }, startBurner)
  const stopBurners = () => burners.forEach((burner) => burner.kill("SIGKILL"))
  process.once("SIGINT", () => (stopBurners(), process.exit(130)))
  process.once("SIGTERM", () => (stopBurners(), process.exit(143)))
  log(`${options.runs} run(s) of npm test with ${options.burners} busy core(s) beside them; load ${loadAverage()}`)
  const results = []
  try {
    for (let index = 1; index <= options.runs; index++) {
      log(`run ${index} of ${options.runs}`)
      results.push(await runOnce(index, options.vitest))
    }
  } finally {
    stopBurners()
  }
  const lines = ["", "run  status  wall      load at start → end  failed files"]
  for (const r of results) {
    lines.push(
      `${String(r.index).padEnd(5)}${String(r.status).padEnd(8)}${`${r.seconds.toFixed(0)} s`.padEnd(10)}${
        `${r.loadAtStart} → ${r.loadAtEnd}`.padEnd(21)
      }${r.failed.join(", ") || "none"}`
    )
  }
  for (const r of results) {
    lines.push("", `run ${r.index}: the ten slowest files`)
    for (const s of r.slowest) lines.push(`  ${s.seconds.toFixed(1).padStart(7)} s  ${s.file}`)
  }
  process.stdout.write(`${lines.join("\n")}\n`)
  writeFileSync(path.join(OUT, "summary.json"), JSON.stringify(results, null, 2))
  return results.every((r) => r.status === 0) ? 0 : 1
}

process.exitCode = await main()
