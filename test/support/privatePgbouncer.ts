import { Effect, Option } from "effect"
import { execFileSync, spawn } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import pg from "pg"
import { freePort, waitFor } from "./processes.js"

/** Debian's `pgbouncer` package; `scripts/ci-prerequisites.sh` installs it where it can. */
export const PGBOUNCER = "/usr/sbin/pgbouncer"
export const pgbouncerInstalled = existsSync(PGBOUNCER)

/**
 * Whether this PgBouncer keeps named statements across a transaction pool's server connections
 * (1.21 and later, `max_prepared_statements`; D18). Debian 12's is 1.18, which refuses the
 * setting: the service then falls back to unnamed statements by itself (src/Sql.ts, `PREPARED`).
 */
export const pgbouncerPreparesStatements = (): boolean => {
  if (!pgbouncerInstalled) return false
  const [, major = "0", minor = "0"] = /PgBouncer (\d+)\.(\d+)/.exec(execFileSync(PGBOUNCER, ["--version"], {
    encoding: "utf8"
  })) ?? []
  return Number(major) > 1 || (Number(major) === 1 && Number(minor) >= 21)
}

const AS_ROOT = process.getuid?.() === 0

/** The postgres user's uid and gid: PgBouncer refuses to run as root, so root runs it as that user. */
const postgresUser = () => {
  const fields = readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.startsWith("postgres:"))?.split(
    ":"
  )
  if (fields?.[2] === undefined || fields[3] === undefined) {
    throw new Error("running as root needs a postgres user to run PgBouncer as")
  }
  return { uid: Number(fields[2]), gid: Number(fields[3]) }
}

/**
 * A PgBouncer of the test's own, in transaction pooling mode, in front of the PostgreSQL
 * server of `serverUrl` (the machine's test server, untouched): its configuration and log
 * in a temporary directory, on a free port, every user of `users` let in without a
 * password (the server behind it trusts them). Stopped and removed when the scope closes.
 * Answers `pooled(url)`: the same database URL through the pooler.
 */
export const privatePgbouncer = (serverUrl: URL, users: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-pgbouncer-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const ini = path.join(dir, "pgbouncer.ini")
    writeFileSync(
      ini,
      [
        "[databases]",
        `* = host=${serverUrl.hostname} port=${serverUrl.port === "" ? "5432" : serverUrl.port}`,
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${port}`,
        "unix_socket_dir =",
        "auth_type = trust",
        `auth_file = ${path.join(dir, "userlist.txt")}`,
        "pool_mode = transaction",
        ...(pgbouncerPreparesStatements() ? ["max_prepared_statements = 200"] : []),
        "max_client_conn = 500",
        "default_pool_size = 20",
        `logfile = ${path.join(dir, "pgbouncer.log")}`,
        `pidfile = ${path.join(dir, "pgbouncer.pid")}`,
        // Sent by some drivers at start-up; PgBouncer refuses unknown ones unless told to ignore them.
        "ignore_startup_parameters = extra_float_digits,options",
        ""
      ].join("\n")
    )
    writeFileSync(path.join(dir, "userlist.txt"), [...new Set(users)].map((user) => `"${user}" ""\n`).join(""))
    if (AS_ROOT) {
      const { gid, uid } = postgresUser()
      for (const file of ["", "pgbouncer.ini", "userlist.txt"]) chownSync(path.join(dir, file), uid, gid)
    }
    const [file, args] = AS_ROOT ? ["runuser", ["-u", "postgres", "--", PGBOUNCER, ini]] : [PGBOUNCER, [ini]]
    let output = ""
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] })
        child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
        child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
        return child
      }),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        }).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    )
    const pooled = (url: string) => {
      const through = new URL(url)
      through.hostname = "127.0.0.1"
      through.port = String(port)
      return through.toString()
    }
    yield* waitFor(
      "PgBouncer answers",
      Effect.promise(async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${output}`)
        const maintenance = new URL(serverUrl)
        maintenance.pathname = "/postgres"
        const client = new pg.Client({ connectionString: pooled(maintenance.toString()) })
        client.on("error", () => {})
        try {
          await client.connect()
          await client.query("SELECT 1")
          return Option.some(true)
        } catch {
          return Option.none()
        } finally {
          await client.end().catch(() => undefined)
        }
      }),
      { limit: "20 seconds", every: "100 millis" }
    )
    return { port, pooled, log: () => readFileSync(path.join(dir, "pgbouncer.log"), "utf8") } as const
  })
