import { Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { userInfo } from "node:os"
import type { Cleanup } from "./cleanup.js"
import { endQuietly, openClient } from "./pg.js"

let chosenServer: string | undefined

/**
 * Where the run's databases go from now on: the bench's private server (`bench/lib/postgres.ts`),
 * set before the first database is made.
 */
export const useServer = (url: string): void => {
  chosenServer = url
}

/**
 * The PostgreSQL server to use: the one `useServer` set, else `DATABASE_URL` (its database name
 * is ignored) or the local default.
 */
const serverUrl = (): URL => {
  const url = new URL(chosenServer ?? process.env.DATABASE_URL ?? "postgres://localhost:5432/account_api")
  if (url.username === "") url.username = process.env.PGUSER ?? userInfo().username
  return url
}

const databaseUrl = (database: string): string => {
  const url = serverUrl()
  url.pathname = `/${database}`
  return url.toString()
}

export const redisUrl = (): string => process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

export const uniqueSuffix = (): string => randomBytes(5).toString("hex")

/** CREATE/DROP DATABASE cannot run in a transaction, so each gets a connection of its own. */
const adminQuery = async (statement: string): Promise<void> => {
  const client = await openClient({ connectionString: databaseUrl("postgres"), application_name: "bench admin" })
  try {
    await client.query(statement)
  } finally {
    await endQuietly(client)
  }
}

/**
 * A new, empty database for this run (the service migrates it as it starts), dropped WITH (FORCE)
 * after every other step of the clean-up: the connections still on it are cut off then, and
 * every client the bench opens listens for that (`bench/lib/pg.ts`).
 */
export const createDatabase = async (cleanup: Cleanup): Promise<string> => {
  const name = `account_api_bench_${uniqueSuffix()}`
  await adminQuery(`CREATE DATABASE "${name}"`)
  cleanup.defer(`drop database ${name}`, () => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`), {
    last: true
  })
  return databaseUrl(name)
}

/** A Redis key prefix for this run; every key under it is deleted at the end. */
export const createRedisPrefix = (cleanup: Cleanup): string => {
  const prefix = `account-api-bench-${uniqueSuffix()}`
  cleanup.defer(`delete Redis keys ${prefix}:*`, async () => {
    const redis = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1 })
    try {
      await redis.connect()
      let cursor = "0"
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500)
        if (keys.length > 0) await redis.del(...keys)
        cursor = next
      } while (cursor !== "0")
    } finally {
      redis.disconnect()
    }
  })
  return prefix
}
