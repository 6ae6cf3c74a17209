import { DateTime, Schema } from "effect"
import { RequestBody } from "./Strict.js"
import { ExpectedVersion } from "./Version.js"

/**
 * The account's settings (D22, docs/decisions/D22-limits-where-people-live.md): the time zone its
 * limits, warnings and spend report count days, weeks, months and hours in, and the day its
 * weeks start on.
 */

export const DEFAULT_TIMEZONE = "UTC"
export const DEFAULT_WEEK_START = "monday"

/** An IANA zone name: letters, digits and `_+-` parts separated by `/` ("UTC", "America/Los_Angeles"). */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/

/** Whether the platform's time zone data knows a zone by this name. */
export const knownZone = (name: string): boolean => {
  if (!ZONE_NAME.test(name)) return false
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name })
    return true
  } catch {
    return false
  }
}

export const Timezone = Schema.String.pipe(Schema.filter(knownZone)).annotations({
  description: "An IANA time zone name, such as UTC, Europe/Berlin or America/Los_Angeles.",
  message: () => ({ message: "must be an IANA time zone name, such as Europe/Berlin", override: true })
})

export const WeekStart = Schema.Literal("monday", "sunday").annotations({
  description: "The first day of a week limit's week.",
  message: () => ({ message: "must be monday or sunday", override: true })
})
export type WeekStart = typeof WeekStart.Type

export class AccountSettings extends Schema.Class<AccountSettings>("AccountSettings")({
  timezone: Schema.String.annotations({ description: "The account's IANA time zone; UTC until one is saved." }),
  week_start: WeekStart,
  version: Schema.Int.annotations({ description: "0 while nothing was ever saved." }),
  updated_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

export const ReplaceSettingsRequest = RequestBody("ReplaceSettingsRequest", {
  timezone: Timezone,
  week_start: WeekStart,
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true })
})
export type ReplaceSettingsRequest = typeof ReplaceSettingsRequest.Type

/** The settings an account has before any is saved. */
export const defaultSettings = new AccountSettings({
  timezone: DEFAULT_TIMEZONE,
  week_start: DEFAULT_WEEK_START,
  version: 0,
  updated_at: null
})

/** What `settings.updated` carries (D22): who saved them, and the settings as saved. */
export const SettingsUpdated = Schema.Struct({
  user_id: Schema.String,
  timezone: Schema.String,
  week_start: WeekStart,
  version: Schema.Int
})

export const settingsOf = (row: {
  readonly timezone: string
  readonly week_start: WeekStart
  readonly version: number
  readonly updated_at: Date
}): AccountSettings =>
  new AccountSettings({ ...row, updated_at: DateTime.unsafeFromDate(row.updated_at) }, { disableValidation: true })
