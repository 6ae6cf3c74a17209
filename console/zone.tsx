/**
 * The account's time zone and week start (D22), read once a sign-in for every page
 * (`getSettings`, any member) and again after an administrator saves them, and a limit's period
 * in that zone: when it resets, in words ("resets at midnight, Europe/Berlin"), and its start and
 * end as times there. The limits' own reads carry the zone their periods were computed in
 * (`timezone`), which pages pass here; the week's first day comes from the settings.
 */
import type { AccountApiClient } from "@account-api/client/web"
import { type ComponentChildren, createContext } from "preact"
import { useContext } from "preact/hooks"
import { windowWords } from "./events.js"
import { type Loaded, useLoad } from "./session.js"

export type AccountSettings = Awaited<ReturnType<AccountApiClient["getSettings"]>>
type Limit = Awaited<ReturnType<AccountApiClient["getLimits"]>>["limits"][number]

const SettingsContext = createContext<Loaded<AccountSettings> | undefined>(undefined)

/** Reads the account's settings once for the pages inside it. */
export const SettingsProvider = ({ children }: { readonly children: ComponentChildren }) => {
  const settings = useLoad((api) => api.getSettings(), [])
  return <SettingsContext.Provider value={settings}>{children}</SettingsContext.Provider>
}

const DEFAULT: AccountSettings = { timezone: "UTC", week_start: "monday", version: 0, updated_at: null }

/** The settings as read (UTC and Monday, the service's defaults, until they are), and `reload` after a save. */
export const useAccountSettings = (): { readonly settings: AccountSettings; readonly reload: () => void } => {
  const loaded = useContext(SettingsContext)
  return { settings: loaded?.data ?? DEFAULT, reload: loaded?.reload ?? (() => {}) }
}

/** Every zone the browser knows, UTC first: what the settings' zone is chosen from. */
export const zoneNames = (): ReadonlyArray<string> => {
  const known = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : []
  return ["UTC", ...known.filter((zone) => zone !== "UTC")]
}

const formats = new Map<string, Intl.DateTimeFormat>()
const formatIn = (zone: string): Intl.DateTimeFormat | undefined => {
  const known = formats.get(zone)
  if (known !== undefined) return known
  try {
    const made = new Intl.DateTimeFormat("en-GB", {
      timeZone: zone,
      day: "numeric",
      month: "short",
      year: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23"
    })
    formats.set(zone, made)
    return made
  } catch {
    return undefined
  }
}

/**
 * An instant as a time in a zone, named: `2026-03-08T00:00:00+01:00` in Europe/Berlin as
 * `8 Mar 2026, 00:00 Europe/Berlin`. A zone the browser does not know leaves the text as sent.
 */
export const formatInZone = (iso: string, zone: string): string => {
  const at = new Date(iso)
  const format = formatIn(zone)
  if (isNaN(at.getTime()) || format === undefined) return iso
  const part = (type: Intl.DateTimeFormatPartTypes) => format.formatToParts(at).find((one) => one.type === type)?.value
  return `${part("day")} ${part("month")} ${part("year")}, ${part("hour")}:${part("minute")} ${zone}`
}

const DAY_NAMES = { monday: "Monday", sunday: "Sunday" } as const

/**
 * When a limit's period starts again, in the account's zone: "resets on the hour", "resets at
 * midnight, Europe/Berlin", "resets Monday at midnight, ...", "resets on the 1st at midnight, ...",
 * "over the last 60 minutes" for a rolling window.
 */
export const resetWords = (
  limit: Pick<Limit, "period" | "window_minutes">,
  zone: string,
  weekStart: AccountSettings["week_start"]
): string => {
  switch (limit.period) {
    case "hour":
      return "resets on the hour"
    case "day":
      return `resets at midnight, ${zone}`
    case "week":
      return `resets ${DAY_NAMES[weekStart]} at midnight, ${zone}`
    case "month":
      return `resets on the 1st at midnight, ${zone}`
    case "rolling":
      return `over the last ${windowWords(limit.window_minutes)}`
    case "session":
      return "counts each session on its own"
    case "concurrent":
      return "counts sessions open now"
  }
}

/**
 * A limit's reset in words with the current period's end in the zone: "resets at midnight, UTC
 * (this period ends 9 Mar 2026, 00:00 UTC)". Just after the zone changed the two may differ: the
 * period running then ends where the old zone put its end (D22: a change applies from each
 * period's next boundary).
 */
export const ResetOf = (
  { limit, zone }: { readonly limit: Pick<Limit, "period" | "window_minutes" | "period_end">; readonly zone: string }
) => {
  const { settings } = useAccountSettings()
  const words = resetWords(limit, zone, settings.week_start)
  return (
    <span class="reset">
      {words}
      {limit.period_end !== null && (
        <span class="muted">{` (this period ends ${formatInZone(limit.period_end, zone)})`}</span>
      )}
    </span>
  )
}
