import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

/**
 * One reading of every time a client sends (D15, `src/Domain/Time.ts`): a date or date-time that
 * names no moment (30 February, hour 24, minute 60, an offset of 24 hours) is 422 wherever a time
 * is taken, never moved to the moment `Date` would roll it over to.
 */

const IMPOSSIBLE = [
  "2026-02-30T00:00:00Z",
  "2025-02-29T12:00:00Z",
  "2026-04-31T00:00:00Z",
  "2026-01-01T24:00:00Z",
  "2026-01-01T23:60:00Z",
  "2026-01-01T23:59:60Z",
  "2026-01-01T00:00:00+24:00",
  "2026-13-01T00:00:00Z",
  "2026-00-10T00:00:00Z"
] as const

/** A leap day, an offset, fractions: moments that exist, taken. */
const POSSIBLE = ["2024-02-29T12:00:00Z", "2026-01-01T23:59:59.999+05:30", "2026-01-01T00:00:00-00:00"] as const

const validation = (reply: { readonly status: number; readonly body: unknown }) => ({
  status: reply.status,
  code: (reply.body as { code?: string } | undefined)?.code
})

layer(TestApp(), { excludeTestServices: true })("times a client sends (D15)", (it) => {
  describe("impossible times are 422 everywhere", () => {
    it.effect("the wallet's as-of, the ledger export's from and to, the spend report's bounds", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const paths = (time: string) => {
          const t = encodeURIComponent(time)
          return [
            `/developer/account/wallet/as-of?time=${t}`,
            `/developer/account/wallet/ledger.csv?from=${t}`,
            `/developer/account/wallet/ledger.csv?to=${t}`,
            `/developer/account/spend?group_by=day&from=${t}`,
            `/developer/account/spend?group_by=day&to=${t}`
          ]
        }
        for (const time of IMPOSSIBLE) {
          for (const path of paths(time)) {
            expect(validation(yield* call("GET", path, { token: user.token })), path).toEqual({
              status: 422,
              code: "validation_failed"
            })
          }
        }
        for (const time of POSSIBLE) {
          for (const path of paths(time)) {
            // Possible times are read: the as-of of a time before the account is still an answer.
            const reply = yield* call("GET", path, { token: user.token })
            expect(reply.status, `${path}: ${JSON.stringify(reply.body)}`).toBe(200)
          }
        }
      }))

    it.effect("a limit's raise until that names no moment is 422", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        // Tomorrow's hour 24 and minute 60: `Date` would read them as moments within the raise's reach.
        const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)
        for (const until of [`${tomorrow}T24:00:00Z`, `${tomorrow}T10:60:00Z`]) {
          const reply = yield* call("PUT", "/developer/account/limits", {
            token: admin.token,
            body: {
              limits: [{ scope: "account", period: "day", amount_usd: "5", raise: { amount_usd: "6", until } }]
            }
          })
          expect(validation(reply), until).toEqual({ status: 422, code: "validation_failed" })
        }
        const taken = yield* call("PUT", "/developer/account/limits", {
          token: admin.token,
          body: {
            limits: [{
              scope: "account",
              period: "day",
              amount_usd: "5",
              raise: { amount_usd: "6", until: `${tomorrow}T23:59:59Z` }
            }]
          }
        })
        expect(taken.status, JSON.stringify(taken.body)).toBe(200)
      }))
  })
})
