/**
 * Money and times as the console shows them, from the strings the API sends (D20): an amount is
 * the wire's decimal string (`"1234.500000"`), reshaped as text, never turned into a number, so
 * no binary float ever touches it. Times are the wire's ISO 8601 strings, shown in UTC as the
 * API's periods are; but for a grant's expiry (D21), which a person types in their own zone and
 * reads back in it, with the zone named.
 */

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/

/** `"1234.500000"` as `$1,234.50`: digits grouped, trailing zeros past the cents dropped; every digit sent is kept. */
export const formatUsd = (amount: string): string => {
  const parts = DECIMAL.exec(amount)
  if (parts === null) return amount
  const [, sign = "", whole = "0", fraction = ""] = parts
  const cents = fraction.replace(/0+$/, "").padEnd(2, "0")
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",")
  return `${sign}$${grouped}.${cents}`
}

/**
 * An amount as a form's field starts with it (`"100.000000"` as `100.00`): the same digits as
 * `formatUsd` shows, without the dollar sign and the grouping a field would send back.
 */
export const amountInput = (amount: string): string => formatUsd(amount).replace("$", "").replace(/,/g, "")

/**
 * An amount in micro-dollars (the API's six decimals) as a whole number, for lengths only (a
 * bar's height, a meter's fill): exact, no binary fraction; never shown.
 */
export const micros = (amount: string): bigint => {
  const parts = DECIMAL.exec(amount)
  if (parts === null) return 0n
  const [, sign = "", whole = "0", fraction = ""] = parts
  const value = BigInt(`${whole}${fraction.slice(0, 6).padEnd(6, "0")}`)
  return sign === "-" ? -value : value
}

/** Micro-dollars (a whole number) as the API's decimal string: `1500000n` is `"1.500000"`. */
export const usdOfMicros = (value: bigint): string => {
  const size = value < 0n ? -value : value
  return `${value < 0n ? "-" : ""}${size / 1_000_000n}.${(size % 1_000_000n).toString().padStart(6, "0")}`
}

/** Whether the decimal string is below zero: the wallet's `available_usd` after an over-spend. */
export const isNegative = (amount: string): boolean => amount.startsWith("-")

/** Whether the decimal string is zero, however many decimals it has. */
export const isZero = (amount: string): boolean => /^-?0*(\.0*)?$/.test(amount)

const ISO = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::(\d{2}))?/

/** `2026-03-01T09:30:12.345Z` as `2026-03-01 09:30 UTC`. */
export const formatTime = (iso: string): string => {
  const parts = ISO.exec(iso)
  return parts === null ? iso : `${parts[1]} ${parts[2]} UTC`
}

const LOCAL_TIME = new Intl.DateTimeFormat("en-GB", {
  day: "numeric",
  month: "short",
  year: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
  timeZoneName: "short"
})

/** The browser's zone as `formatLocalTime` names it: `UTC`, `GMT-5`, `CET`. */
export const localZone = (at: Date = new Date()): string =>
  LOCAL_TIME.formatToParts(at).find((part) => part.type === "timeZoneName")?.value ?? "local time"

/**
 * A grant's expiry (D21) in the browser's zone, named: `2026-12-31T23:59:00Z` as
 * `31 Dec 2026, 23:59 UTC`, or `1 Jan 2027, 00:59 CET` in Berlin.
 */
export const formatLocalTime = (iso: string): string => {
  const at = new Date(iso)
  if (isNaN(at.getTime())) return iso
  const part = (type: Intl.DateTimeFormatPartTypes) =>
    LOCAL_TIME.formatToParts(at).find((one) => one.type === type)?.value ?? ""
  return `${part("day")} ${part("month")} ${part("year")}, ${part("hour")}:${part("minute")} ${part("timeZoneName")}`
}

const two = (value: number) => String(value).padStart(2, "0")

/**
 * What a `datetime-local` input holds (`2026-12-31T23:59`, the browser's zone) as ISO 8601 with
 * that zone's offset (`2026-12-31T23:59:00-05:00`), as the API takes an expiry (D21); `""` as
 * it is, and anything the browser cannot read as it is too, for the service to refuse at its field.
 */
export const localInputToIso = (value: string): string => {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(value)) return value
  const at = new Date(value)
  if (isNaN(at.getTime())) return value
  const offset = -at.getTimezoneOffset()
  const sign = offset < 0 ? "-" : "+"
  const size = Math.abs(offset)
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}T${two(at.getHours())}:${
    two(at.getMinutes())
  }:${two(at.getSeconds())}${sign}${two(Math.floor(size / 60))}:${two(size % 60)}`
}

/**
 * An instant as a `datetime-local` input holds it in the browser's zone (`2026-12-31T23:59`):
 * what a form starts with when it offers a time back to be changed; `localInputToIso` reverses it.
 */
export const isoToLocalInput = (iso: string): string => {
  const at = new Date(iso)
  if (isNaN(at.getTime())) return iso
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}T${two(at.getHours())}:${
    two(at.getMinutes())
  }`
}

/** `2026-03-01T09:30:12.345Z` as `2026-03-01`. */
export const formatDay = (iso: string): string => iso.slice(0, 10)

/**
 * A long id cut to its last characters for a table or a legend; the whole id stays in a title.
 * The last, not the first: ids made close together (UUID v7) share their first characters.
 */
export const shortId = (id: string): string => (id.length > 12 ? `…${id.slice(-8)}` : id)

/** A runner's session id cut in the middle (`nightly-…build-17`), where both ends say something; whole in a title. */
export const middleId = (id: string): string => (id.length > 20 ? `${id.slice(0, 9)}…${id.slice(-9)}` : id)

/** The one word for spending attributed to no repository or user. */
export const UNATTRIBUTED_LABEL = "Unattributed"

const KIND_WORDS: Readonly<Record<string, string>> = {
  budget_set: "Budget set",
  credit_added: "Credit added",
  reserve: "Hold",
  reserve_release: "Hold released",
  spend: "Spend",
  credit_expired: "Credit expired",
  credit_voided: "Credit voided"
}

/** A ledger entry's kind in words (`reserve_release` as "Hold released"), the same on every page. */
export const kindWord = (kind: string): string => KIND_WORDS[kind] ?? kind.replace(/_/g, " ")

const digitsOnly = (text: string, digits: number) => new RegExp(`^\\d{1,${digits}}$`).test(text)

/**
 * A whole number a person typed (a percentage, a count of sessions), never an amount: the one
 * number the console reads from text. Anything but 1 to `digits` digits is NaN, which the JSON
 * body carries as null and the service refuses at its field (422).
 */
export const wholeNumber = (text: string, digits = 3) => digitsOnly(text, digits) ? Number.parseInt(text, 10) : NaN
