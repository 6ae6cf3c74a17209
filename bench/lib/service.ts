import { randomBytes } from "node:crypto"
import { programCommand } from "../../scripts/programs.mjs"
import { type ServerProcess, startServer } from "./child.js"
import type { Cleanup } from "./cleanup.js"
import { createDatabase, createRedisPrefix, redisUrl } from "./stores.js"

/** The servers a run measures, on one database of their own. */
export interface Stack {
  /** The real service, `src/main.ts`, as `npm start` runs it. */
  readonly api: ServerProcess
  /** `bench/baseline/server.ts`: the same SQL and token checks without Effect. */
  readonly baseline: ServerProcess
  readonly databaseUrl: string
  /** Both servers verify tokens with it, so one sign-in serves both. */
  readonly authSecret: string
}

export interface StackOptions {
  /** Where the API writes a V8 CPU profile when it stops; none when undefined. */
  readonly cpuProfileDir?: string | undefined
}

export const startStack = async (cleanup: Cleanup, options: StackOptions = {}): Promise<Stack> => {
  const databaseUrl = await createDatabase(cleanup)
  const authSecret = randomBytes(48).toString("base64url")
  // The queue under the run's prefix too: BullMQ's default one may be in use on this Redis.
  const redisPrefix = createRedisPrefix(cleanup)
  const api = await startServer({
    name: "api",
    command: programCommand("api", {
      nodeArgs: options.cpuProfileDir === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", options.cpuProfileDir]
    }),
    env: {
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl(),
      REDIS_PREFIX: redisPrefix,
      SETTLEMENT_QUEUE_PREFIX: redisPrefix,
      AUTH_SECRET: authSecret,
      // The login suite measures sign-in, not the limiter: a few users sign in thousands of times.
      SIGN_INS_PER_EMAIL: "1000000000",
      SIGN_INS_PER_ADDRESS: "1000000000",
      // Each connection is one user asking as fast as it can: the budget (D15) is still taken on
      // every request, so its cost is measured, but never refuses.
      USER_REQUESTS_PER_SECOND: "1000000000",
      USER_REQUEST_BURST: "1000000000",
      // Request lines are info: at warning the run measures serving, not the log pipe, whose cost
      // depends on where a deployment ships its logs.
      LOG_LEVEL: "warning"
    },
    readyPath: "/readyz",
    cleanup
  })
  // Started once the API has migrated the database.
  const baseline = await startServer({
    name: "baseline",
    // A reference, not the service: it runs from its TypeScript as it always has, so its figures stay comparable.
    command: [process.execPath, ["--import", "tsx", "bench/baseline/server.ts"]],
    env: { DATABASE_URL: databaseUrl, AUTH_SECRET: authSecret },
    readyPath: "/readyz",
    cleanup
  })
  return { api, baseline, databaseUrl, authSecret }
}
