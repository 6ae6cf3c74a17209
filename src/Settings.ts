import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { type Account, accountKey } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import { type AccountSettings, defaultSettings, type ReplaceSettingsRequest, settingsOf } from "./Domain/Settings.js"
import { Events } from "./Events.js"
import { SettingsRepo } from "./Settings/Repo.js"
import { inTransaction } from "./Sql/Errors.js"

/**
 * The account's settings (D22): read by any member, replaced by an administrator under their
 * version (D5), each save announced by a `settings.updated` event in its transaction. A change
 * of zone or week start applies from each period's next boundary (SettingsRepo).
 */
export class Settings extends Effect.Service<Settings>()("Settings", {
  effect: Effect.gen(function*() {
    const repo = yield* SettingsRepo
    const events = yield* Events
    const sql = yield* SqlClient.SqlClient

    const get = Effect.fn("Settings.get")(function*(account: Account) {
      const row = yield* repo.find(accountKey(account))
      return Option.match(row, { onNone: (): AccountSettings => defaultSettings, onSome: settingsOf })
    })

    const replace = Effect.fn("Settings.replace")(function*(
      account: Account,
      userId: string,
      request: ReplaceSettingsRequest
    ) {
      // The schema took a zone the platform knows (it writes the periods' bounds); the database,
      // which counts the periods, must know it by the same name. Saved as sent: the platform would
      // rename some zones to older names (Asia/Kolkata to Asia/Calcutta).
      const timezone = request.timezone
      const { known } = yield* repo.knowsZone(timezone)
      if (!known) {
        return yield* ValidationFailed.of([
          new FieldError({ pointer: "#/timezone", detail: "must be an IANA time zone name, such as Europe/Berlin" })
        ])
      }
      const expected = request.expected_version ?? 0
      return yield* Effect.gen(function*() {
        const write = { ...accountKey(account), timezone, week_start: request.week_start, expected_version: expected }
        const saved = yield* (expected === 0 ? repo.insert(write) : repo.update(write))
        if (Option.isNone(saved)) {
          const current = yield* get(account)
          return yield* new VersionConflict({
            detail: "The settings were changed by another writer; read them again.",
            current_version: current.version
          })
        }
        const settings = settingsOf(saved.value)
        yield* events.append([{
          account,
          event: {
            type: "settings.updated",
            data: {
              user_id: userId,
              timezone: settings.timezone,
              week_start: settings.week_start,
              version: settings.version
            }
          }
        }])
        return settings
      }).pipe(inTransaction(sql))
    })

    return { get, replace } as const
  }),
  dependencies: [SettingsRepo.Default, Events.Default]
}) {}
