import { describe, expect, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import * as Money from "../src/Domain/Money.js"

const decodeWire = Schema.decodeUnknownEither(Money.UsdAmount)

const problemOf = (input: unknown) =>
  Either.match(decodeWire(input), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.message,
    onRight: () => undefined
  })

describe("Money", () => {
  it("formats every amount with exactly six decimals", () => {
    expect(Money.format(Money.decimal("12.5"))).toBe("12.500000")
    expect(Money.format(Money.zero)).toBe("0.000000")
    expect(Money.format(Money.decimal("0.000001"))).toBe("0.000001")
    expect(Money.format(Money.max)).toBe("999999999999.999999")
    expect(Money.format(Money.zero.minus(Money.decimal("0.25")))).toBe("-0.250000")
    expect(Money.format(Money.decimal("-0"))).toBe("0.000000")
  })

  it("adds and subtracts exactly where binary floats would not", () => {
    const sum = Money.decimal("0.1").plus(Money.decimal("0.2"))
    expect(Money.format(sum)).toBe("0.300000")
    expect(sum.eq(Money.decimal("0.3"))).toBe(true)
    const big = Money.max.plus(Money.max).minus(Money.decimal("0.000001"))
    expect(Money.format(big)).toBe("1999999999999.999997")
  })

  it("accepts the wire format and compares amounts as numbers", () => {
    for (const input of ["0", "5", "5.000000", "0.000001", "999999999999.999999", "007.5"]) {
      expect(Either.isRight(decodeWire(input)), input).toBe(true)
    }
    const five = Either.getOrThrow(decodeWire("5"))
    expect(five.eq(Either.getOrThrow(decodeWire("5.000000")))).toBe(true)
  })

  it("refuses numbers, signs, exponents, too many digits and empty strings with a clear reason", () => {
    expect(problemOf(5)).toBe("must be a decimal string such as \"12.50\", not a JSON number")
    expect(problemOf(null)).toBe("must be a decimal string such as \"12.50\"")
    expect(problemOf("")).toBe("must not be empty")
    expect(problemOf("-1")).toBe("must not have a sign")
    expect(problemOf("+1")).toBe("must not have a sign")
    expect(problemOf("1e3")).toBe("must not use an exponent")
    expect(problemOf("1.1234567")).toBe("must have at most 6 decimals")
    expect(problemOf("1234567890123")).toBe("must have at most 12 digits before the decimal point")
    for (const input of ["abc", "5.", ".5", " 5", "5 ", "1,5", "0x10", "Infinity", "NaN"]) {
      expect(problemOf(input), input).toBe("must be a decimal string such as \"12.50\"")
    }
  })

  it("a positive amount refuses zero", () => {
    expect(Either.isLeft(Schema.decodeUnknownEither(Money.PositiveUsdAmount)("0.000000"))).toBe(true)
    expect(Either.isRight(Schema.decodeUnknownEither(Money.PositiveUsdAmount)("0.000001"))).toBe(true)
  })

  it("encodes six decimals on the way out and reads PostgreSQL numeric text back exactly", () => {
    expect(Schema.encodeSync(Money.Usd)(Money.decimal("3"))).toBe("3.000000")
    expect(Schema.decodeSync(Money.Usd)("-0.250000").eq(Money.decimal("-0.25"))).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(Money.Usd)(1.5))).toBe(true)
  })
})
