import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { inZone } from "../src/Domain/Time.js"
import { TestSettlement } from "./support/TestSettlement.js"

/**
 * The one rule of a period's bounds (docs/decisions/D22-limits-where-people-live.md, migration
 * 0028's `account_period`): the clock hour, the day from local midnight, the week from its first
 * day and the month, in the account's zone; and a change of zone that keeps the period in force.
 * Checked against the platform's own time zone data, not against a copy of the rule.
 */

interface Bounds {
  readonly start: Date
  readonly end: Date
}

const natural = (period: string, timezone: string, at: Date, weekStart = "monday") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<Bounds>`
      SELECT period_start AS start, period_end AS "end"
      FROM account_natural_period(${period}, ${timezone}, ${weekStart}, ${at})`
    if (row === undefined) return yield* Effect.dieMessage("no period")
    return row
  }).pipe(Effect.orDie)

const withCarried = (period: string, timezone: string, carriedFrom: string, changedAt: Date, at: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<Bounds>`
      SELECT period_start AS start, period_end AS "end"
      FROM account_period(${period}, ${timezone}, 'monday',
        account_carried_periods(${carriedFrom}, 'monday', '{}', ${changedAt}), ${at})`
    if (row === undefined) return yield* Effect.dieMessage("no period")
    return row
  }).pipe(Effect.orDie)

const HOUR_MS = 3_600_000

/** The wall clock in a zone at an instant, as the platform reads it. */
const wallClock = (at: Date, timeZone: string) => {
  const parts = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    hourCycle: "h23",
    weekday: "long",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit"
  }).formatToParts(at)
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? ""
  return { weekday: part("weekday"), day: part("day"), time: `${part("hour")}:${part("minute")}` }
}

const ZONES = [
  "UTC",
  "America/Los_Angeles",
  "America/New_York",
  "Europe/Berlin",
  "Asia/Kolkata",
  "Asia/Kathmandu",
  "Australia/Adelaide",
  "Pacific/Chatham",
  "America/St_Johns"
] as const

layer(TestSettlement(), { excludeTestServices: true, timeout: "120 seconds" })("account periods (D22)", (it) => {
  describe("days across daylight saving", () => {
    it.effect("Los Angeles: 8 March 2026 has 23 hours, 1 November 25, each from local midnight", () =>
      Effect.gen(function*() {
        const march = yield* natural("day", "America/Los_Angeles", new Date("2026-03-08T12:00:00Z"))
        expect(march).toEqual({ start: new Date("2026-03-08T08:00:00Z"), end: new Date("2026-03-09T07:00:00Z") })
        const november = yield* natural("day", "America/Los_Angeles", new Date("2026-11-01T12:00:00Z"))
        expect(november).toEqual({ start: new Date("2026-11-01T07:00:00Z"), end: new Date("2026-11-02T08:00:00Z") })
        expect(inZone(march.start, "America/Los_Angeles")).toBe("2026-03-08T00:00:00-08:00")
        expect(inZone(march.end, "America/Los_Angeles")).toBe("2026-03-09T00:00:00-07:00")
      }))

    it.effect("Kolkata's day starts at 18:30 UTC; the two 01:00 hours of a November night are hours of their own", () =>
      Effect.gen(function*() {
        expect(yield* natural("day", "Asia/Kolkata", new Date("2026-12-02T12:00:00Z"))).toEqual({
          start: new Date("2026-12-01T18:30:00Z"),
          end: new Date("2026-12-02T18:30:00Z")
        })
        expect(yield* natural("hour", "America/Los_Angeles", new Date("2026-11-01T08:30:00Z"))).toEqual({
          start: new Date("2026-11-01T08:00:00Z"),
          end: new Date("2026-11-01T09:00:00Z")
        })
        expect(yield* natural("hour", "America/Los_Angeles", new Date("2026-11-01T09:30:00Z"))).toEqual({
          start: new Date("2026-11-01T09:00:00Z"),
          end: new Date("2026-11-01T10:00:00Z")
        })
      }))

    it.effect("every period holds its instant, starts on the wall clock's boundary, and the next starts at its end", () =>
      Effect.gen(function*() {
        const samples = fc.sample(
          fc.record({
            at: fc.date({
              min: new Date("2020-01-01T00:00:00Z"),
              max: new Date("2035-12-31T00:00:00Z"),
              noInvalidDate: true
            }),
            zone: fc.constantFrom(...ZONES),
            period: fc.constantFrom("hour", "day", "week", "month"),
            weekStart: fc.constantFrom("monday", "sunday")
          }),
          { numRuns: 300, seed: 22 }
        )
        for (const { at, period, weekStart, zone } of samples) {
          const bounds = yield* natural(period, zone, at, weekStart)
          const what = `${period} ${zone} ${weekStart} ${at.toISOString()}`
          expect(bounds.start.getTime(), what).toBeLessThanOrEqual(at.getTime())
          expect(bounds.end.getTime(), what).toBeGreaterThan(at.getTime())
          const start = wallClock(bounds.start, zone)
          if (period === "hour") {
            expect(start.time.endsWith(":00"), what).toBe(true)
            expect(bounds.end.getTime() - bounds.start.getTime(), what).toBe(HOUR_MS)
          } else {
            expect(start.time, what).toBe("00:00")
            expect(wallClock(bounds.end, zone).time, what).toBe("00:00")
          }
          if (period === "week") expect(start.weekday, what).toBe(weekStart === "monday" ? "Monday" : "Sunday")
          if (period === "month") expect(start.day, what).toBe("01")
          const next = yield* natural(period, zone, bounds.end, weekStart)
          expect(next.start.getTime(), what).toBe(bounds.end.getTime())
        }
      }))
  })

  describe("a change of zone", () => {
    it.effect("the period in force keeps its bounds; the next starts at its end and ends at the new zone's boundary", () =>
      Effect.gen(function*() {
        const changedAt = new Date("2026-12-02T12:00:00Z")
        // Before its end: the UTC day in force, whatever the new zone says.
        expect(yield* withCarried("day", "Europe/Berlin", "UTC", changedAt, new Date("2026-12-02T23:30:00Z"))).toEqual({
          start: new Date("2026-12-02T00:00:00Z"),
          end: new Date("2026-12-03T00:00:00Z")
        })
        // The next, short one: from the old end to Berlin's next midnight.
        expect(yield* withCarried("day", "Europe/Berlin", "UTC", changedAt, new Date("2026-12-03T10:00:00Z"))).toEqual({
          start: new Date("2026-12-03T00:00:00Z"),
          end: new Date("2026-12-03T23:00:00Z")
        })
        // Then Berlin's days, whole.
        expect(yield* withCarried("day", "Europe/Berlin", "UTC", changedAt, new Date("2026-12-04T10:00:00Z"))).toEqual({
          start: new Date("2026-12-03T23:00:00Z"),
          end: new Date("2026-12-04T23:00:00Z")
        })
        // Westward, the next day is the rest of Los Angeles' day.
        expect(
          yield* withCarried("day", "America/Los_Angeles", "UTC", changedAt, new Date("2026-12-03T03:00:00Z"))
        ).toEqual({ start: new Date("2026-12-03T00:00:00Z"), end: new Date("2026-12-03T08:00:00Z") })
      }))

    it.effect("periods after a change tile time: no instant is in two, none in none", () =>
      Effect.gen(function*() {
        const samples = fc.sample(
          fc.record({
            changedAt: fc.date({
              min: new Date("2026-01-01T00:00:00Z"),
              max: new Date("2026-12-31T00:00:00Z"),
              noInvalidDate: true
            }),
            from: fc.constantFrom(...ZONES),
            to: fc.constantFrom(...ZONES),
            period: fc.constantFrom("hour", "day", "week", "month")
          }),
          { numRuns: 60, seed: 2222 }
        )
        for (const { changedAt, from, period, to } of samples) {
          const what = `${period} ${from} to ${to} at ${changedAt.toISOString()}`
          let bounds = yield* withCarried(period, to, from, changedAt, changedAt)
          expect(bounds.start.getTime(), what).toBeLessThanOrEqual(changedAt.getTime())
          for (let step = 0; step < 3; step++) {
            const next = yield* withCarried(period, to, from, changedAt, bounds.end)
            expect(next.start.getTime(), what).toBe(bounds.end.getTime())
            expect(next.end.getTime(), what).toBeGreaterThan(next.start.getTime())
            bounds = next
          }
          // Three periods on, the new zone's own.
          expect(bounds, what).toEqual(yield* natural(period, to, bounds.start))
        }
      }))
  })
})
