import { describe, expect, it } from "@effect/vitest"
import * as Money from "../src/Domain/Money.js"
import { applicable, countsSession, type UsedLimit, usedLimitOfColumns } from "../src/Domain/SpendLimit.js"

describe("countsSession", () => {
  const session = { repository_id: "r1", user_id: "u1", labels: { team: "infra" } }
  it("an account limit counts every session; a repository or user limit only its own", () => {
    expect(
      countsSession({ scope: "account", scope_id: null, applies_to: null }, {
        repository_id: null,
        user_id: null,
        labels: {}
      })
    )
      .toBe(true)
    expect(countsSession({ scope: "repository", scope_id: "r1", applies_to: null }, session)).toBe(true)
    expect(countsSession({ scope: "repository", scope_id: "r2", applies_to: null }, session)).toBe(false)
    expect(countsSession({ scope: "user", scope_id: "u1", applies_to: null }, session)).toBe(true)
    expect(
      countsSession({ scope: "user", scope_id: "u1", applies_to: null }, {
        repository_id: "r1",
        user_id: null,
        labels: {}
      })
    ).toBe(
      false
    )
    expect(countsSession({ scope: "session", scope_id: null, applies_to: null }, session)).toBe(false)
  })
  it("a label limit counts the sessions carrying its key with its value (D19)", () => {
    expect(countsSession({ scope: "label", scope_id: "team=infra", applies_to: null }, session)).toBe(true)
    expect(countsSession({ scope: "label", scope_id: "team=web", applies_to: null }, session)).toBe(false)
    expect(countsSession({ scope: "label", scope_id: "owner=infra", applies_to: null }, session)).toBe(false)
    expect(
      countsSession({ scope: "label", scope_id: "team=a=b", applies_to: null }, { ...session, labels: { team: "a=b" } })
    ).toBe(true)
  })
})

describe("countsSession for each member (D22)", () => {
  const session = { repository_id: "r1", user_id: "u1", labels: { team: "infra" } }
  it("an each_ limit as it applies to one member counts that member's sessions only", () => {
    expect(countsSession({ scope: "each_user", scope_id: null, applies_to: "u1" }, session)).toBe(true)
    expect(countsSession({ scope: "each_user", scope_id: null, applies_to: "u2" }, session)).toBe(false)
    expect(countsSession({ scope: "each_repository", scope_id: null, applies_to: "r1" }, session)).toBe(true)
    expect(countsSession({ scope: "each_label", scope_id: "team", applies_to: "team=infra" }, session)).toBe(true)
    expect(countsSession({ scope: "each_label", scope_id: "team", applies_to: "team=web" }, session)).toBe(false)
  })
  it("an each_ limit as saved applies to nobody, and never to a session without the member", () => {
    expect(countsSession({ scope: "each_user", scope_id: null, applies_to: null }, session)).toBe(false)
    expect(countsSession({ scope: "each_user", scope_id: null, applies_to: "u1" }, { ...session, user_id: null }))
      .toBe(false)
  })
})

describe("applicable (D22): the most specific limit of a period wins", () => {
  const NOW = new Date("2026-03-10T12:00:00Z")
  const limit = (
    id: string,
    scope: UsedLimit["scope"],
    options: { scope_id?: string; applies_to?: string; period?: "day" | "rolling"; window?: number } = {}
  ): UsedLimit =>
    usedLimitOfColumns({
      id,
      scope,
      scope_id: options.scope_id ?? null,
      applies_to: options.applies_to ?? null,
      period: options.period ?? "day",
      window_minutes: options.window ?? null,
      amount_usd: Money.decimal("5"),
      used_usd: Money.zero,
      warn_at_percent: [],
      raise_amount_usd: null,
      raise_until: null,
      max_open_sessions: null,
      open_sessions: null,
      period_start: null,
      period_end: null,
      leaving: []
    }, NOW)
  const ids = (limits: ReadonlyArray<UsedLimit>) => limits.map((l) => `${l.id}/${l.applies_to ?? ""}`)

  it("a user's own limit of the same period replaces the each_user default for that user only", () => {
    const limits = [
      limit("each", "each_user", { applies_to: "u1" }),
      limit("each", "each_user", { applies_to: "u2" }),
      limit("own", "user", { scope_id: "u1" })
    ]
    expect(ids(applicable(limits))).toEqual(["each/u2", "own/"])
  })
  it("a limit of another period, or of another window, replaces nothing", () => {
    const limits = [
      limit("each", "each_user", { applies_to: "u1", period: "rolling", window: 60 }),
      limit("own-day", "user", { scope_id: "u1" }),
      limit("own-300", "user", { scope_id: "u1", period: "rolling", window: 300 })
    ]
    expect(ids(applicable(limits))).toEqual(["each/u1", "own-day/", "own-300/"])
  })
  it("labels and repositories replace theirs; an each_ limit as saved is left out", () => {
    const limits = [
      limit("each-label", "each_label", { scope_id: "team", applies_to: "team=infra" }),
      limit("own-label", "label", { scope_id: "team=infra" }),
      limit("each-repo", "each_repository", { applies_to: "r1" }),
      limit("saved", "each_user")
    ]
    expect(ids(applicable(limits))).toEqual(["own-label/", "each-repo/r1"])
  })
})
