import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { countsSession, periodOf, utcDay } from "../src/Domain/SpendLimit.js"

/** The periods of D16 (docs/decisions/D16-spend-controls.md): UTC day, ISO week from Monday, calendar month. */
describe("periodOf", () => {
  it("a day is the UTC calendar day that holds now", () => {
    expect(periodOf("day", new Date("2026-03-01T23:59:59.999Z"))).toEqual({
      start: new Date("2026-03-01T00:00:00.000Z"),
      end: new Date("2026-03-02T00:00:00.000Z")
    })
  })

  it("a week runs from Monday, whichever day now is, across months and years", () => {
    // 2026-03-01 is a Sunday: its week began on Monday 23 February.
    expect(periodOf("week", new Date("2026-03-01T12:00:00Z"))).toEqual({
      start: new Date("2026-02-23T00:00:00Z"),
      end: new Date("2026-03-02T00:00:00Z")
    })
    expect(periodOf("week", new Date("2026-03-02T00:00:00Z"))).toEqual({
      start: new Date("2026-03-02T00:00:00Z"),
      end: new Date("2026-03-09T00:00:00Z")
    })
    // 2027-01-01 is a Friday: ISO week 53 of 2026 began on Monday 28 December.
    expect(periodOf("week", new Date("2027-01-01T08:00:00Z"))).toEqual({
      start: new Date("2026-12-28T00:00:00Z"),
      end: new Date("2027-01-04T00:00:00Z")
    })
  })

  it("a month is the calendar month, leap February included", () => {
    expect(periodOf("month", new Date("2028-02-29T22:00:00Z"))).toEqual({
      start: new Date("2028-02-01T00:00:00Z"),
      end: new Date("2028-03-01T00:00:00Z")
    })
    expect(periodOf("month", new Date("2026-12-31T23:59:59Z"))).toEqual({
      start: new Date("2026-12-01T00:00:00Z"),
      end: new Date("2027-01-01T00:00:00Z")
    })
  })

  it("a session limit has no calendar bounds", () => {
    expect(periodOf("session", new Date())).toBeNull()
  })

  it("every period holds now, starts at a UTC midnight and has the length of its kind", () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("9999-11-30T00:00:00Z"), noInvalidDate: true }),
        fc.constantFrom("day" as const, "week" as const, "month" as const),
        (now, period) => {
          const bounds = periodOf(period, now)
          expect(bounds).not.toBeNull()
          if (bounds === null) return
          expect(bounds.start.getTime()).toBeLessThanOrEqual(now.getTime())
          expect(bounds.end.getTime()).toBeGreaterThan(now.getTime())
          expect(bounds.start.toISOString().slice(10)).toBe("T00:00:00.000Z")
          const days = (bounds.end.getTime() - bounds.start.getTime()) / 86_400_000
          if (period === "day") expect(days).toBe(1)
          if (period === "week") {
            expect(days).toBe(7)
            expect(bounds.start.getUTCDay()).toBe(1)
          }
          if (period === "month") {
            expect([28, 29, 30, 31]).toContain(days)
            expect(bounds.start.getUTCDate()).toBe(1)
          }
        }
      )
    )
  })

  it("utcDay is the UTC date, whatever the local zone", () => {
    expect(utcDay(new Date("2026-03-01T23:30:00-05:00"))).toBe("2026-03-02")
  })
})

describe("countsSession", () => {
  const session = { repository_id: "r1", user_id: "u1", labels: { team: "infra" } }
  it("an account limit counts every session; a repository or user limit only its own", () => {
    expect(countsSession({ scope: "account", scope_id: null }, { repository_id: null, user_id: null, labels: {} }))
      .toBe(true)
    expect(countsSession({ scope: "repository", scope_id: "r1" }, session)).toBe(true)
    expect(countsSession({ scope: "repository", scope_id: "r2" }, session)).toBe(false)
    expect(countsSession({ scope: "user", scope_id: "u1" }, session)).toBe(true)
    expect(countsSession({ scope: "user", scope_id: "u1" }, { repository_id: "r1", user_id: null, labels: {} })).toBe(
      false
    )
    expect(countsSession({ scope: "session", scope_id: null }, session)).toBe(false)
  })
  it("a label limit counts the sessions carrying its key with its value (D19)", () => {
    expect(countsSession({ scope: "label", scope_id: "team=infra" }, session)).toBe(true)
    expect(countsSession({ scope: "label", scope_id: "team=web" }, session)).toBe(false)
    expect(countsSession({ scope: "label", scope_id: "owner=infra" }, session)).toBe(false)
    expect(countsSession({ scope: "label", scope_id: "team=a=b" }, { ...session, labels: { team: "a=b" } })).toBe(true)
  })
})
