import { describe, expect, it } from "@effect/vitest"
import { drawOrder, type GrantBalance, isDrawable, makeGrantBook, nextDueAt, warningDue } from "../src/Domain/Grants.js"
import * as Money from "../src/Domain/Money.js"

/**
 * D21's rules as pure functions (docs/decisions/D21-credit-grants.md): the draw-down order, the
 * warnings ahead of expiry, and how a transaction's book earmarks, draws, returns and ends grants.
 */

const DAY = 86_400_000
const NOW = new Date("2026-12-01T12:00:00Z")
const usd = (value: string) => Money.decimal(value)

const grant = (id: string, terms: Partial<GrantBalance> = {}): GrantBalance => ({
  id,
  amount: usd("10"),
  drawn: Money.zero,
  held: Money.zero,
  ended: Money.zero,
  priority: 50,
  category: "paid",
  expires_at: null,
  state: "live",
  created_at: new Date(NOW.getTime() - DAY),
  warned_days: null,
  ...terms
})

const money = (balance: GrantBalance | undefined) =>
  balance === undefined
    ? undefined
    : [balance.drawn, balance.held, balance.ended].map(Money.format).concat(balance.state)

describe("the draw-down order (D21)", () => {
  it("is priority, then the soonest expiry (never last), then promotional before paid, then creation, then id", () => {
    const soon = new Date(NOW.getTime() + DAY)
    const later = new Date(NOW.getTime() + 2 * DAY)
    const grants = [
      grant("g-never", {}),
      grant("g-later", { expires_at: later }),
      grant("g-soon-paid", { expires_at: soon }),
      grant("g-soon-promo", { expires_at: soon, category: "promotional" }),
      grant("g-first", { priority: 0 }),
      grant("g-b-newer", { priority: 99, created_at: NOW }),
      grant("g-b", { priority: 99 }),
      grant("g-a", { priority: 99 })
    ]
    expect([...grants].sort(drawOrder).map((g) => g.id)).toEqual([
      "g-first",
      "g-soon-promo",
      "g-soon-paid",
      "g-later",
      "g-never",
      "g-a",
      "g-b",
      "g-b-newer"
    ])
  })

  it("nothing is drawn from a grant from its expires_at on", () => {
    expect(isDrawable(grant("g", { expires_at: new Date(NOW.getTime() + 1) }), NOW)).toBe(true)
    expect(isDrawable(grant("g", { expires_at: NOW }), NOW)).toBe(false)
    expect(isDrawable(grant("g", { state: "voided" }), NOW)).toBe(false)
  })
})

describe("warnings ahead of expiry", () => {
  const expires = new Date(NOW.getTime() + 30 * DAY)
  it("are due 7 days and 1 day ahead, once each, and the sweep's next moment follows them", () => {
    const fresh = grant("g", { expires_at: expires })
    expect(nextDueAt(fresh)).toEqual(new Date(expires.getTime() - 7 * DAY))
    expect(warningDue(fresh, NOW)).toBeUndefined()
    const sixDaysOut = new Date(expires.getTime() - 6 * DAY)
    expect(warningDue(fresh, sixDaysOut)).toBe(7)
    const warned = { ...fresh, warned_days: 7 }
    expect(warningDue(warned, sixDaysOut)).toBeUndefined()
    expect(nextDueAt(warned)).toEqual(new Date(expires.getTime() - DAY))
    // Late by more than a day (the sweep was down): the 1-day one, not both.
    expect(warningDue(fresh, new Date(expires.getTime() - DAY / 2))).toBe(1)
    expect(nextDueAt({ ...fresh, warned_days: 1 })).toEqual(expires)
    expect(warningDue({ ...fresh, warned_days: 1 }, expires)).toBeUndefined()
  })

  it("a warning whose moment came before the grant was made is not sent", () => {
    const short = grant("g", { expires_at: new Date(NOW.getTime() + 3 * DAY), created_at: NOW })
    expect(nextDueAt(short)).toEqual(new Date(NOW.getTime() + 2 * DAY))
    expect(warningDue(short, new Date(NOW.getTime() + 60_000))).toBeUndefined()
    expect(warningDue(short, new Date(NOW.getTime() + 2 * DAY))).toBe(1)
    expect(nextDueAt(grant("g"))).toBeNull()
  })
})

describe("a transaction's grant book", () => {
  it("earmarks in order, draws earmarks then free grants then leaves the rest to the base", () => {
    const book = makeGrantBook([
      grant("second", { amount: usd("5") }),
      grant("first", { priority: 1, amount: usd("3") })
    ])
    expect(book.earmark(usd("4"), NOW)).toEqual([
      { grant_id: "first", amount: usd("3") },
      { grant_id: "second", amount: usd("1") }
    ])
    // A spend of 9 from a session holding those earmarks: 4 from them, second's free 4, the last 1 the base.
    const drawn = book.draw(
      [{ grant_id: "first", amount: usd("3") }, { grant_id: "second", amount: usd("1") }],
      usd("9"),
      NOW
    )
    expect(drawn.draws).toEqual([
      { grant_id: "first", amount: usd("3"), from_reserved: usd("3") },
      { grant_id: "second", amount: usd("5"), from_reserved: usd("1") }
    ])
    expect(drawn.earmarks).toEqual([])
    const all = book.all()
    expect(all.map((g) => g.id)).toEqual(["first", "second"])
    expect(all.map(money)).toEqual([
      ["3.000000", "0.000000", "0.000000", "used"],
      ["5.000000", "0.000000", "0.000000", "used"]
    ])
  })

  it("ends a due grant's free amount, keeps its earmarks, and ends what they return", () => {
    const due = grant("due", { expires_at: NOW, held: usd("4") })
    const book = makeGrantBook([due, grant("later", { expires_at: new Date(NOW.getTime() + DAY) })])
    expect(book.expireDue(NOW)).toEqual([{ grant_id: "due", amount: usd("6"), kind: "credit_expired" }])
    expect(book.earmark(usd("1"), NOW)).toEqual([{ grant_id: "later", amount: usd("1") }])
    // Its earmark still pays the session's spend…
    const drawn = book.draw([{ grant_id: "due", amount: usd("4") }], usd("1.5"), NOW)
    expect(drawn.draws).toEqual([{ grant_id: "due", amount: usd("1.5"), from_reserved: usd("1.5") }])
    // …and what the release returns ends then.
    expect(book.giveBack(drawn.earmarks)).toEqual([{ grant_id: "due", amount: usd("2.5"), kind: "credit_expired" }])
    expect(money(book.all().find((g) => g.id === "due"))).toEqual(["1.500000", "0.000000", "8.500000", "expired"])
  })

  it("a void ends a live grant (credit_voided), and only a live one", () => {
    const book = makeGrantBook([grant("g", { held: usd("10") })])
    expect(book.end("g", "credit_voided")).toEqual({ grant_id: "g", amount: Money.zero, kind: "credit_voided" })
    expect(book.end("g", "credit_voided")).toBeUndefined()
    expect(book.giveBack([{ grant_id: "g", amount: usd("10") }])).toEqual([
      { grant_id: "g", amount: usd("10"), kind: "credit_voided" }
    ])
    expect(book.changed().map(money)).toEqual([["0.000000", "0.000000", "10.000000", "voided"]])
  })
})
