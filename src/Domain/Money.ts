import { Decimal as DecimalJs } from "decimal.js"
import { Schema } from "effect"

/**
 * The one place USD amounts are parsed, computed and formatted (D6). Amounts
 * are exact decimals end to end: JSON strings on the wire, `numeric(18,6)` in
 * PostgreSQL (which `pg` hands over as strings) and `decimal.js` in between.
 * Nothing here ever goes through a binary float.
 */

/**
 * Every amount has at most six decimals and at most thirteen integer digits
 * (a balance, or the difference of two), so 40 significant digits keep every
 * sum and difference exact; rounding never happens.
 */
const Exact = DecimalJs.clone({ precision: 40, rounding: DecimalJs.ROUND_HALF_EVEN, toExpNeg: -40, toExpPos: 40 })

export type Decimal = DecimalJs

export const zero: Decimal = new Exact(0)

/** The largest amount a `numeric(18,6)` column holds, and so the largest budget. */
export const max: Decimal = new Exact("999999999999.999999")

/** The wire format of an amount a client sends (D6). */
export const WIRE_PATTERN = /^\d{1,12}(\.\d{1,6})?$/

export const isDecimal = (u: unknown): u is Decimal => DecimalJs.isDecimal(u)

/** An amount from a trusted source: the database, a constant, another `Decimal`. */
export const decimal = (value: string | Decimal): Decimal => new Exact(value)

/** The sum of amounts; zero for none. */
export const sum = (amounts: ReadonlyArray<Decimal>): Decimal => amounts.reduce((total, a) => total.plus(a), zero)

/** The smaller of two amounts. */
export const min = (a: Decimal, b: Decimal): Decimal => a.lte(b) ? a : b

/** Exactly six decimals; negatives (an over-spent `available_usd`) as `-0.250000`, never `-0.000000`. */
export const format = (amount: Decimal): string => (amount.isZero() ? zero : amount).toFixed(6)

/** Why a string is not a wire amount, in words a client can act on; `undefined` when it is one. */
export const wireProblem = (s: string): string | undefined => {
  if (s === "") return "must not be empty"
  if (/^[+-]/.test(s)) return "must not have a sign"
  if (/^\d*\.?\d*[eE]/.test(s)) return "must not use an exponent"
  const parts = /^(\d+)(?:\.(\d+))?$/.exec(s)
  if (parts === null) return "must be a decimal string such as \"12.50\""
  if ((parts[1] ?? "").length > 12) return "must have at most 12 digits before the decimal point"
  if ((parts[2] ?? "").length > 6) return "must have at most 6 decimals"
  return undefined
}

/** Parses a wire amount; `undefined` when it is not one. */
export const parseWire = (s: string): Decimal | undefined => wireProblem(s) === undefined ? new Exact(s) : undefined

export const DecimalFromSelf = Schema.declare(isDecimal, {
  identifier: "Decimal",
  equivalence: () => (a, b) => a.eq(b),
  pretty: () => format
})

const WireString = Schema.String.annotations({
  message: (issue) => ({
    message: typeof issue.actual === "number"
      ? "must be a decimal string such as \"12.50\", not a JSON number"
      : "must be a decimal string such as \"12.50\"",
    override: true
  })
}).pipe(
  Schema.filter((s) => wireProblem(s) ?? true, {
    jsonSchema: { pattern: WIRE_PATTERN.source },
    description:
      "a non-negative USD amount as a decimal string: up to 12 digits, optionally a point and up to 6 decimals"
  })
)

/** An amount a client sends: `"12.5"`, `"0.000001"`; never a number, a sign, an exponent or `""`. */
export const UsdAmount = Schema.transform(WireString, DecimalFromSelf, {
  strict: true,
  decode: (s) => new Exact(s),
  encode: format
}).annotations({ identifier: "UsdAmount" })

/** A wire amount with a digit other than 0: what `PositiveUsdAmount` accepts, for the OpenAPI document. */
export const POSITIVE_WIRE_PATTERN = /^(?=[0.]*[1-9])\d{1,12}(\.\d{1,6})?$/

export const PositiveUsdAmount = UsdAmount.pipe(
  Schema.filter((amount) => amount.gt(zero) || "must be above zero")
).annotations({
  identifier: "PositiveUsdAmount",
  // The document would otherwise show the wire string's schema, which admits "0".
  jsonSchema: {
    type: "string",
    description:
      "a USD amount above zero as a decimal string: up to 12 digits, optionally a point and up to 6 decimals",
    pattern: POSITIVE_WIRE_PATTERN.source
  }
})

const SixDecimals = Schema.String.pipe(
  Schema.pattern(/^-?\d+\.\d{6}$/),
  Schema.annotations({
    description: "a USD amount with exactly six decimals; only an available amount can be negative"
  })
)

/**
 * An amount the service sends, and the shape PostgreSQL returns `numeric(18,6)`
 * in: exactly six decimals, a sign only when negative.
 */
export const Usd = Schema.transform(SixDecimals, DecimalFromSelf, {
  strict: true,
  decode: (s) => new Exact(s),
  encode: format
}).annotations({ identifier: "Usd" })
