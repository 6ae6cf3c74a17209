import { DateTime, ParseResult, Schema } from "effect"

/**
 * Times a client sends (D15): one reading for every one of them, the ledger export's `from` and
 * `to`, the wallet's `as-of` time, the spend report's bounds and a limit's raise `until`.
 *
 * An RFC 3339 date-time with its zone, or (where a day is meant) a plain date, naming a moment
 * that exists: `Date` reads `2026-02-30T00:00:00Z` as 2 March and `T24:00:00` as the next
 * midnight, so each field is held to its range (the month's days, leap years included; hours
 * 0–23, minutes and seconds 0–59, offsets within ±23:59) before the moment is made, and a time
 * that names none is refused rather than moved. Years 0001–9999, as PostgreSQL's timestamps hold.
 */

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:Z|([+-])(\d{2}):(\d{2}))$/i

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const

const isLeap = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0

/** The days of a month of a year (1-based month), by the proleptic Gregorian calendar. */
const daysIn = (year: number, month: number) => month === 2 && isLeap(year) ? 29 : MONTH_DAYS[month - 1] ?? 0

const dayExists = (year: number, month: number, day: number) =>
  year >= 1 && year <= 9999 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month)

/** The moment an RFC 3339 date-time names, or undefined when it is not one or names none. */
export const parseInstant = (text: string): DateTime.Utc | undefined => {
  const match = DATE_TIME.exec(text)
  if (match === null) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number)
  const [offsetHours, offsetMinutes] = [match[9], match[10]].map((part) => part === undefined ? 0 : Number(part))
  if (
    year === undefined || month === undefined || day === undefined || hour === undefined || minute === undefined ||
    second === undefined || offsetHours === undefined || offsetMinutes === undefined
  ) return undefined
  if (!dayExists(year, month, day) || hour > 23 || minute > 59 || second > 59) return undefined
  if (offsetHours > 23 || offsetMinutes > 59) return undefined
  const made = DateTime.make(text)
  if (made._tag === "None") return undefined
  // An offset can carry a moment of year 0001 or 9999 over the edge.
  const utcYear = DateTime.getPartUtc(made.value, "year")
  return utcYear >= 1 && utcYear <= 9999 ? made.value : undefined
}

/** A plain date's UTC midnight, or undefined when it is not one or names no day. */
export const parseDate = (text: string): DateTime.Utc | undefined => {
  const match = DATE.exec(text)
  if (match === null) return undefined
  const [year, month, day] = match.slice(1, 4).map(Number)
  if (year === undefined || month === undefined || day === undefined || !dayExists(year, month, day)) return undefined
  const made = DateTime.make(`${text}T00:00:00Z`)
  return made._tag === "None" ? undefined : made.value
}

/**
 * A time a client sends as an RFC 3339 date-time (its zone required), decoded to the moment it
 * names; encoded as ISO 8601 UTC. `message` says what was expected, for the 422's detail.
 */
export const Instant = (options: { readonly description: string; readonly message: string }) =>
  Schema.transformOrFail(Schema.String, Schema.DateTimeUtcFromSelf, {
    strict: true,
    decode: (text, _, ast) => {
      const time = parseInstant(text)
      return time === undefined
        ? ParseResult.fail(new ParseResult.Type(ast, text, options.message))
        : ParseResult.succeed(time)
    },
    encode: (time) => ParseResult.succeed(DateTime.formatIso(time))
  }).annotations({
    description: options.description,
    jsonSchema: { type: "string", format: "date-time", description: options.description },
    message: () => ({ message: options.message, override: true })
  })

/**
 * An instant as written in a time zone (D22): RFC 3339 with the zone's offset then, to the
 * second (`2026-03-08T00:00:00-08:00`), how a period's bounds are shown.
 */
export const inZone = (instant: Date, timeZone: string): string => {
  const offsetMs = DateTime.zonedOffset(DateTime.unsafeMakeZoned(instant, { timeZone }))
  const local = new Date(instant.getTime() + offsetMs).toISOString().slice(0, 19)
  const minutes = Math.round(Math.abs(offsetMs) / 60_000)
  const sign = offsetMs < 0 ? "-" : "+"
  return `${local}${sign}${String(Math.floor(minutes / 60)).padStart(2, "0")}:${String(minutes % 60).padStart(2, "0")}`
}

/** An instant the service writes with its zone's offset (`inZone`), as a string: clients parse it as RFC 3339. */
export const ZonedTime = Schema.String.annotations({
  jsonSchema: { type: "string", format: "date-time" }
})
