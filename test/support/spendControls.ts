import { SqlClient } from "@effect/sql"
import { Queue, QueueEvents } from "bullmq"
import { Effect } from "effect"
import { Redis as IORedis } from "ioredis"
import type { Account } from "../../src/Domain/Account.js"

/** A limit as the PUT saves it (docs/decisions/D16-spend-controls.md, D19-fleet-controls.md). */
export type LimitInput =
  | {
    readonly scope:
      | "account"
      | "repository"
      | "user"
      | "label"
      | "session"
      | "each_user"
      | "each_repository"
      | "each_label"
    readonly scope_id: string | null
    readonly period: "hour" | "day" | "week" | "month" | "rolling" | "session"
    /** A rolling limit's window (D22). */
    readonly window_minutes?: number
    readonly amount_usd: string
    readonly warn_at_percent?: ReadonlyArray<number>
    readonly raise?: { readonly amount_usd: string; readonly until: Date }
  }
  | {
    readonly scope: "account" | "repository" | "user" | "label" | "each_user" | "each_repository" | "each_label"
    readonly scope_id: string | null
    readonly period: "concurrent"
    readonly max_open_sessions: number
  }

/**
 * Saves an account's limits as `PUT /developer/account/limits` leaves them (a set, its version,
 * the limits), written in SQL here: what is tested is the enforcement, not the write.
 */
export const saveLimits = (account: Account, limits: ReadonlyArray<LimitInput>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`
        INSERT INTO spend_limit_sets (account_kind, account_id, version) VALUES (${account.kind}, ${account.id}, 1)
        ON CONFLICT (account_kind, account_id) DO UPDATE SET version = spend_limit_sets.version + 1, updated_at = now()`
      yield* sql`DELETE FROM spend_limits WHERE account_kind = ${account.kind} AND account_id = ${account.id}`
      for (const limit of limits) {
        const spend = limit.period === "concurrent" ? undefined : limit
        yield* sql`
          INSERT INTO spend_limits (account_kind, account_id, scope, scope_id, period, window_minutes, amount_usd,
            max_open_sessions, warn_at_percent, raise_amount_usd, raise_until)
          VALUES (${account.kind}, ${account.id}, ${limit.scope}, ${limit.scope_id}, ${limit.period},
            ${spend?.window_minutes ?? null},
            ${spend?.amount_usd ?? null}, ${limit.period === "concurrent" ? limit.max_open_sessions : null},
            ${`{${(spend?.warn_at_percent ?? []).join(",")}}`}::smallint[], ${spend?.raise?.amount_usd ?? null},
            ${spend?.raise?.until ?? null})`
      }
    }))
    const rows = yield* sql<{ id: string; scope: string; scope_id: string | null; period: string }>`
      SELECT id, scope, scope_id, period FROM spend_limits WHERE account_kind = ${account.kind} AND account_id = ${account.id}`
    return rows
  }).pipe(Effect.orDie)

export interface JobAnswer {
  readonly result: Record<string, unknown> | undefined
  readonly failed: string | undefined
}

/**
 * A runner written with plain BullMQ, as the README shows it: its own connection, queue and
 * events under `prefix`, BullMQ's defaults (one attempt), results through QueueEvents.
 */
export const plainRunner = (redisUrl: string, prefix: string) =>
  Effect.gen(function*() {
    const connection = new IORedis(redisUrl, { maxRetriesPerRequest: null })
    const queue = new Queue("settlement", { connection, prefix })
    const events = new QueueEvents("settlement", { connection: { url: redisUrl }, prefix })
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        await events.close()
        await queue.close()
        await connection.quit()
      })
    )
    yield* Effect.promise(() => events.waitUntilReady())
    const send = (name: string, data: Record<string, unknown>): Effect.Effect<JobAnswer> =>
      Effect.promise(async () => {
        const job = await queue.add(name, data)
        try {
          return { result: (await job.waitUntilFinished(events, 30_000)) as Record<string, unknown>, failed: undefined }
        } catch (error) {
          return { result: undefined, failed: error instanceof Error ? error.message : String(error) }
        }
      })
    return { send, queue } as const
  })

/** Saves the account's zone as if saved long ago (D22): no period of an earlier zone is still in force. */
export const saveZone = (account: Account, timezone: string, weekStart: "monday" | "sunday" = "monday") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`
      INSERT INTO account_settings (account_kind, account_id, timezone, week_start, version)
      VALUES (${account.kind}, ${account.id}, ${timezone}, ${weekStart}, 1)
      ON CONFLICT (account_kind, account_id) DO UPDATE SET timezone = EXCLUDED.timezone,
        week_start = EXCLUDED.week_start, carried = '{}', version = account_settings.version + 1`).pipe(Effect.orDie)
