import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey } from "../Domain/Account.js"
import { WeekStart } from "../Domain/Settings.js"
import { orDefect } from "../Sql/Errors.js"

const SettingsRow = Schema.Struct({
  timezone: Schema.String,
  week_start: WeekStart,
  version: Schema.Int,
  updated_at: Schema.DateFromSelf
})

const SettingsWrite = Schema.Struct({
  ...AccountKey.fields,
  timezone: Schema.String,
  week_start: WeekStart,
  expected_version: Schema.Int
})

/**
 * The account's settings (D22), SQL only. A write carries over the periods in force when it is
 * made (`account_carried_periods`, migration 0028): each keeps its start and end under the old
 * zone, and the next one starts where it ends.
 */
export class SettingsRepo extends Effect.Service<SettingsRepo>()("Settings/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const find = SqlSchema.findOne({
      Request: AccountKey,
      Result: SettingsRow,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT timezone, week_start, version, updated_at FROM account_settings
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** Whether the database knows the zone by this name too: the batch counts periods in it. */
    const knowsZone = SqlSchema.single({
      Request: Schema.String,
      Result: Schema.Struct({ known: Schema.Boolean }),
      execute: (name) => sql`SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = ${name}) AS known`
    })

    /** The first save (expected version 0): nothing when a concurrent first save won. */
    const insert = SqlSchema.findOne({
      Request: SettingsWrite,
      Result: SettingsRow,
      execute: ({ account_id, account_kind, timezone, week_start }) =>
        sql`INSERT INTO account_settings (account_kind, account_id, timezone, week_start, carried, version)
            VALUES (${account_kind}, ${account_id}, ${timezone}, ${week_start},
              account_carried_periods('UTC', 'monday', '{}', now()), 1)
            ON CONFLICT DO NOTHING
            RETURNING timezone, week_start, version, updated_at`
    })

    /** A later save: nothing unless the stored version is still the expected one. */
    const update = SqlSchema.findOne({
      Request: SettingsWrite,
      Result: SettingsRow,
      execute: ({ account_id, account_kind, expected_version, timezone, week_start }) =>
        sql`UPDATE account_settings
            SET timezone = ${timezone}, week_start = ${week_start},
              carried = account_carried_periods(timezone, week_start, carried, now()),
              version = version + 1, updated_at = now()
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND version = ${expected_version}
            RETURNING timezone, week_start, version, updated_at`
    })

    return {
      find: orDefect(find),
      knowsZone: orDefect(knowsZone),
      insert: orDefect(insert),
      update: orDefect(update)
    } as const
  })
}) {}
