import { Effect } from "effect"
import { execFile } from "node:child_process"
import { chownSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import path from "node:path"
import pg from "pg"
import { findPostgresBinDir } from "../../scripts/setup.mjs"
import { freePort } from "./processes.js"

const AS_ROOT = process.getuid?.() === 0

/** Runs a PostgreSQL tool as the server's user: PostgreSQL refuses to run as root. */
const tool = (binDir: string, name: string, args: ReadonlyArray<string>) =>
  Effect.async<void>((resume) => {
    const [file, fileArgs] = AS_ROOT
      ? ["runuser", ["-u", "postgres", "--", path.join(binDir, name), ...args]]
      : [path.join(binDir, name), [...args]]
    execFile(file, fileArgs, (error, stdout, stderr) => {
      resume(
        error === null
          ? Effect.void
          : Effect.dieMessage(`${name} ${args.join(" ")} failed (${error.message}):\n${stdout}${stderr}`)
      )
    })
  })

/**
 * A PostgreSQL server of the test's own: a fresh cluster in a temporary
 * directory, on a free port, that the test may crash and start again (the
 * machine's shared one is never touched). Its `database` is created empty;
 * the cluster is stopped and removed when the scope closes.
 */
export const privatePostgres = (database: string) =>
  Effect.gen(function*() {
    const binDir = findPostgresBinDir()
    if (binDir === undefined) {
      return yield* Effect.dieMessage("no PostgreSQL server binaries (initdb, pg_ctl) are installed")
    }
    const port = yield* freePort
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const dir = mkdtempSync(path.join(tmpdir(), "account-api-postgres-"))
        if (AS_ROOT) {
          const { gid, uid } = postgresUser()
          chownSync(dir, uid, gid)
        }
        return dir
      }),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const cluster = path.join(dataDir, "cluster")
    const role = AS_ROOT ? "postgres" : userInfo().username
    yield* tool(binDir, "initdb", ["-D", cluster, "--auth=trust", "-U", role, "--no-sync"])
    const pgCtl = (...args: ReadonlyArray<string>) => tool(binDir, "pg_ctl", ["-D", cluster, ...args])
    // pg_ctl passes -o through a shell, hence the quotes around the socket directory.
    const start = pgCtl(
      "-l",
      path.join(dataDir, "server.log"),
      "-o",
      `-p ${port} -k '${dataDir}' -c listen_addresses=127.0.0.1 -c fsync=off`,
      "-w",
      "start"
    )
    /** As a crash: no checkpoint, clients cut off; the next start recovers from the WAL. */
    const stopImmediately = pgCtl("-m", "immediate", "-w", "stop")
    yield* Effect.acquireRelease(start, () => stopImmediately.pipe(Effect.ignore))
    const url = `postgres://${role}@127.0.0.1:${port}`
    yield* Effect.promise(async () => {
      const client = new pg.Client({ connectionString: `${url}/postgres` })
      await client.connect()
      await client.query(`CREATE DATABASE "${database}"`)
      await client.end()
    })
    return {
      url: `${url}/${database}`,
      start,
      stopImmediately,
      restartImmediately: pgCtl("-m", "immediate", "-w", "restart")
    } as const
  })

/** The postgres user's uid and gid, from the passwd database (Debian's packages create that user). */
const postgresUser = () => {
  const fields = readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.startsWith("postgres:"))?.split(
    ":"
  )
  if (fields?.[2] === undefined || fields[3] === undefined) {
    throw new Error("running as root needs a postgres user to run the server as")
  }
  return { uid: Number(fields[2]), gid: Number(fields[3]) }
}
