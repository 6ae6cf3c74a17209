/**
 * Money and times as the console shows them, from the strings the API sends (D20): an amount is
 * the wire's decimal string (`"1234.500000"`), reshaped as text, never turned into a number, so
 * no binary float ever touches it. Times are the wire's ISO 8601 strings, shown in UTC as the
 * API's periods are.
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
  spend: "Spend"
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
