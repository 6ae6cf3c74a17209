import { Queue } from "bullmq"
import { Redis } from "ioredis"
import { type ChildProcess, spawn } from "node:child_process"
import { setTimeout as sleep } from "node:timers/promises"
import { programCommand, ROOT } from "../../scripts/programs.mjs"
import { SETTLEMENT_QUEUE } from "../../src/Settlement/Jobs.js"
import { readCpuSeconds, readPeakRssMb } from "./child.js"
import type { Cleanup } from "./cleanup.js"
import { createRedisPrefix, redisUrl } from "./stores.js"

/** The settlement worker under test, in a process of its own, on a Redis prefix of its own. */
export interface WorkerProcess {
  readonly name: string
  readonly pid: number
  /** The worker's Redis prefix: producers must use the same one to reach it. */
  readonly redisPrefix: string
  /** Peak resident memory so far (VmHWM), in MB; undefined where /proc is not available. */
  readonly peakRssMb: () => number | undefined
  /** CPU time used so far (user + system), in seconds; undefined where /proc is not available. */
  readonly cpuSeconds: () => number | undefined
  /** The last lines it wrote (at the bench's log level, its warnings and errors), for a failed run's report. */
  readonly recentOutput: () => string
  readonly stop: () => Promise<void>
}

export interface WorkerOptions {
  readonly databaseUrl: string
  readonly cleanup: Cleanup
  /** Extra settings, e.g. `SETTLEMENT_CONCURRENCY`. */
  readonly env?: Readonly<Record<string, string>>
  /** Extra `node` flags, such as `--cpu-prof`. */
  readonly nodeArgs?: ReadonlyArray<string>
}

const READY_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 30_000
const OUTPUT_KEPT_BYTES = 16 * 1024

/** Whether the child has exited within `timeoutMs`; the timer does not keep the run alive once it has. */
const exited = (child: ChildProcess, timeoutMs: number): Promise<boolean> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve(true)
    : Promise.race([
      new Promise<boolean>((resolve) => child.once("exit", () => resolve(true))),
      sleep(timeoutMs, false, { ref: false })
    ])

/**
 * Starts the settlement worker as `npm start` runs it (`programCommand`, one
 * process, so the pid we sample and profile is the worker itself) and
 * waits until it has registered with BullMQ. It has no HTTP port; readiness is
 * its blocking connection showing up among the queue's workers.
 */
export const startSettlementWorker = async (options: WorkerOptions): Promise<WorkerProcess> => {
  const name = "worker"
  const redisPrefix = createRedisPrefix(options.cleanup)
  const [file, args] = programCommand("worker", { nodeArgs: options.nodeArgs ?? [] })
  const child = spawn(file, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      REDIS_URL: redisUrl(),
      REDIS_PREFIX: redisPrefix,
      // As the API in the stack: a line per job at info would measure the log pipe.
      LOG_LEVEL: "warning",
      ...options.env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const { pid } = child
  if (pid === undefined) throw new Error("the worker did not start")
  let output = ""
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-OUTPUT_KEPT_BYTES)
  }
  child.stdout.on("data", keep)
  child.stderr.on("data", keep)
  const killOnExit = () => child.kill("SIGKILL")
  process.once("exit", killOnExit)

  let peak: number | undefined
  const peakRssMb = () => {
    const now = readPeakRssMb(pid)
    if (now !== undefined) peak = Math.max(peak ?? 0, now)
    return peak
  }
  let stopped: Promise<void> | undefined
  let ready = false
  child.once("exit", (code, signal) => {
    if (ready && stopped === undefined) process.stderr.write(`${name} exited on its own (${signal ?? code}):\n${output}\n`)
  })
  const stop = () => {
    stopped ??= (async () => {
      peakRssMb()
      // D8: SIGTERM finishes the jobs in flight and exits 0.
      child.kill("SIGTERM")
      if (!(await exited(child, STOP_TIMEOUT_MS))) {
        process.stderr.write(`${name} ignored SIGTERM for ${STOP_TIMEOUT_MS} ms; killing it\n`)
        child.kill("SIGKILL")
        await exited(child, STOP_TIMEOUT_MS)
      } else if (child.exitCode !== 0) {
        process.stderr.write(`${name} exited with ${child.exitCode ?? child.signalCode} after SIGTERM:\n${output}\n`)
      }
      process.off("exit", killOnExit)
    })()
    return stopped
  }
  options.cleanup.defer(`stop ${name}`, stop)

  const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null })
  const queue = new Queue(SETTLEMENT_QUEUE, { connection, prefix: redisPrefix })
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${name} exited before it was ready:\n${output}`)
      }
      if ((await queue.getWorkersCount()) > 0) break
      if (Date.now() > deadline) {
        await stop()
        throw new Error(`${name} was not ready within ${READY_TIMEOUT_MS} ms:\n${output}`)
      }
      await sleep(200)
    }
  } finally {
    await queue.close()
    connection.disconnect()
  }
  ready = true
  return { name, pid, redisPrefix, peakRssMb, cpuSeconds: () => readCpuSeconds(pid), recentOutput: () => output, stop }
}
