import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import { ROOT } from "../../scripts/programs.mjs"
import type { Cleanup } from "./cleanup.js"

/** A server under test: a program answering HTTP. */
export interface ServerProcess extends ProgramProcess {
  readonly baseUrl: string
}

/** What `spawn` runs: a file, its arguments and its own environment, as `programCommand` (scripts/programs.mjs) gives. */
export type Command = readonly [file: string, args: ReadonlyArray<string>, env?: Readonly<Record<string, string>>]

export interface StartOptions {
  readonly name: string
  /** Run from the repository root; a server of the service comes from `programCommand`, as `npm start` runs it. */
  readonly command: Command
  readonly env: Readonly<Record<string, string>>
  readonly readyPath: string
  readonly cleanup: Cleanup
}

const READY_TIMEOUT_MS = 60_000
const PROBE_TIMEOUT_MS = 1_000
const STOP_TIMEOUT_MS = 10_000
const OUTPUT_KEPT_BYTES = 16 * 1024

/** A port nobody listens on right now, chosen by the kernel. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      probe.close(() => (port > 0 ? resolve(port) : reject(new Error("no free port"))))
    })
  })

/** A figure of /proc/PID/status in MB: `VmHWM` (peak resident set) or `VmRSS` (resident now). */
const readStatusMb = (pid: number, field: "VmHWM" | "VmRSS"): number | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kib = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status)?.[1]
    return kib === undefined ? undefined : Number(kib) / 1024
  } catch {
    return undefined
  }
}

const readPeakRssMb = (pid: number) => readStatusMb(pid, "VmHWM")

/** A process's resident set now, for peaks within a window (VmHWM is the whole life's). */
export const readRssMb = (pid: number) => readStatusMb(pid, "VmRSS")

/** /proc counts in USER_HZ, which is 100 on every Linux architecture Node runs on. */
const TICKS_PER_SECOND = 100

export const readCpuSeconds = (pid: number): number | undefined => {
  try {
    // The command name (field 2) may contain spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

/**
 * The CPU time so far of every process named `name` on this machine (the database server's
 * postmaster and backends), in seconds, with what the ones that ended used: a process's
 * `cutime` and `cstime` count its children that it reaped, as the postmaster reaps each backend
 * that closes. Undefined where /proc is not available.
 */
export const readCpuSecondsOfAll = (name: string): number | undefined => {
  try {
    let total = 0
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
        if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) !== name) continue
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        // utime, stime, cutime and cstime: fields 14 to 17 of the whole line, 12 to 15 after the name.
        total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND
      } catch {
        // Gone between the listing and the read.
      }
    }
    return total
  } catch {
    return undefined
  }
}

/** Whether the child has exited within `timeoutMs`; the timer does not keep the run alive once it has. */
const exited = (child: ChildProcess, timeoutMs: number): Promise<boolean> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve(true)
    : Promise.race([
      new Promise<boolean>((resolve) => child.once("exit", () => resolve(true))),
      sleep(timeoutMs, false, { ref: false })
    ])

/** A program under test, running in a process of its own. */
export interface ProgramProcess {
  readonly name: string
  readonly pid: number
  /** Peak resident memory so far (VmHWM), in MB; undefined where /proc is not available. */
  readonly peakRssMb: () => number | undefined
  /** CPU time used so far (user + system), in seconds; undefined where /proc is not available. */
  readonly cpuSeconds: () => number | undefined
  /** The last lines it wrote (at the bench's log level, its warnings and errors), for a failed run's report. */
  readonly recentOutput: () => string
  readonly stop: () => Promise<void>
}

export interface ProgramOptions {
  readonly name: string
  /** Run from the repository root; a program of the service comes from `programCommand`, as `npm start` runs it. */
  readonly command: Command
  readonly env: Readonly<Record<string, string>>
  /** How long SIGTERM may take (a graceful drain) before SIGKILL. */
  readonly stopTimeoutMs: number
  /** Undefined once the program can serve; else what it is still waiting for, for the error if it never can. */
  readonly whyNotReady: () => Promise<string | undefined>
  readonly cleanup: Cleanup
}

/**
 * Starts the command (one process, not a wrapper and its child, so the pid we
 * sample and profile is the program itself), registers its stop with the
 * clean-up, and waits until `whyNotReady` says it can serve: a process that
 * has started is not yet one that answers.
 */
export const startProgram = async (options: ProgramOptions): Promise<ProgramProcess> => {
  const { name, stopTimeoutMs } = options
  const [file, args, own] = options.command
  const child = spawn(file, args, {
    cwd: ROOT,
    env: { ...process.env, ...own, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const { pid } = child
  if (pid === undefined) throw new Error(`${name} did not start`)
  // Kept for the error message when it fails; the pipes must be drained either way.
  let output = ""
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-OUTPUT_KEPT_BYTES)
  }
  child.stdout.on("data", keep)
  child.stderr.on("data", keep)
  // Last resort if the run dies without cleaning up: never leave a program running.
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
    if (ready && stopped === undefined) {
      process.stderr.write(`${name} exited on its own (${signal ?? code}):\n${output}\n`)
    }
  })
  const stop = () => {
    stopped ??= (async () => {
      peakRssMb()
      // The service's programs drain on SIGTERM and exit 0 (D8, D9).
      child.kill("SIGTERM")
      if (!(await exited(child, stopTimeoutMs))) {
        process.stderr.write(`${name} ignored SIGTERM for ${stopTimeoutMs} ms; killing it\n`)
        child.kill("SIGKILL")
        await exited(child, stopTimeoutMs)
      } else if (child.exitCode !== 0) {
        process.stderr.write(`${name} exited with ${child.exitCode ?? child.signalCode} after SIGTERM:\n${output}\n`)
      }
      process.off("exit", killOnExit)
    })()
    return stopped
  }
  options.cleanup.defer(`stop ${name}`, stop)

  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited before it was ready:\n${output}`)
    }
    const waitingFor = await options.whyNotReady()
    if (waitingFor === undefined) break
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`${name} was not ready within ${READY_TIMEOUT_MS} ms (${waitingFor}):\n${output}`)
    }
    await sleep(200)
  }
  ready = true
  return { name, pid, peakRssMb, cpuSeconds: () => readCpuSeconds(pid), recentOutput: () => output, stop }
}

/** Starts a server on a free port and waits until `readyPath` answers 200: an open port alone does not mean it can serve. */
export const startServer = async (options: StartOptions): Promise<ServerProcess> => {
  const port = await freePort()
  const baseUrl = `http://127.0.0.1:${port}`
  const program = await startProgram({
    name: options.name,
    command: options.command,
    env: { ...options.env, PORT: String(port) },
    stopTimeoutMs: STOP_TIMEOUT_MS,
    cleanup: options.cleanup,
    whyNotReady: () =>
      fetch(baseUrl + options.readyPath, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) }).then(
        async (response) => {
          await response.arrayBuffer()
          return response.status === 200 ? undefined : `last status ${response.status}`
        },
        (error: unknown) => `no answer: ${error instanceof Error ? error.message : String(error)}`
      )
  })
  return { ...program, baseUrl }
}

/**
 * The CPU time so far of a process and its children (and of the children it reaped), in seconds:
 * a PostgreSQL server's postmaster, its backends and background workers, and none of another
 * server's on the same machine. Undefined where /proc is not available.
 */
export const readCpuSecondsOfTree = (pid: number): number | undefined => {
  try {
    let total = 0
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        // ppid is field 4 of the whole line, 2 after the name.
        if (Number(entry) !== pid && Number(fields[1]) !== pid) continue
        total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND
      } catch {
        // Gone between the listing and the read.
      }
    }
    return total
  } catch {
    return undefined
  }
}

let postgresPid: number | undefined

/** The run's own PostgreSQL server, whose processes alone `readPostgresCpuSeconds` counts from now on. */
export const countPostgresOf = (pid: number): void => {
  postgresPid = pid
}

/**
 * The database server's CPU time so far: the run's own server's processes when it has one
 * (`countPostgresOf`), else every process named `postgres` on the machine.
 */
export const readPostgresCpuSeconds = (): number | undefined =>
  postgresPid === undefined ? readCpuSecondsOfAll("postgres") : readCpuSecondsOfTree(postgresPid)
