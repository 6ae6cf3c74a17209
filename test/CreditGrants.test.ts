import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import { AppConfig } from "../src/Config.js"
import type { Grant } from "../src/Domain/Grants.js"
import * as Money from "../src/Domain/Money.js"
import { serveOn } from "../src/Http.js"
import { plainRunner } from "./support/spendControls.js"
import { call, signedInUser } from "./support/TestApp.js"
import { TestSettlement } from "./support/TestSettlement.js"

/**
 * D21 (docs/decisions/D21-credit-grants.md) as its users meet it: an administrator's credits as
 * grants over HTTP, a runner's sessions through plain BullMQ drawing them in the stated order,
 * expiry with and without running work, void, the budget's floor, and what bad input gets.
 */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(
  Layer.provideMerge(Books.Default.pipe(Layer.provideMerge(TestSettlement())))
)

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

/** A grant as the API sends it. */
type GrantBody = typeof Grant.Encoded

interface EntryBody {
  readonly id: string
  readonly sequence: number
  readonly kind: string
  readonly amount_usd: string
  readonly session_id: string | null
  readonly available_after_usd: string
  readonly grants: ReadonlyArray<{ readonly grant_id: string; readonly amount_usd: string }>
}

const usd = (value: string) => Money.decimal(value)
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString()

/** An administrator of an account of their own, with a base budget set (enforced). */
const admin = (base: string) =>
  Effect.gen(function*() {
    const user = yield* signedInUser({ admin: true })
    const set = yield* call("PUT", "/developer/account/wallet", {
      token: user.token,
      body: { budget_usd: base, idempotency_key: randomUUID() }
    })
    expect(set.status).toBe(200)
    return user
  })

const credit = (token: string, body: Record<string, unknown>) =>
  call("POST", "/developer/account/wallet/credits", { token, body: { idempotency_key: randomUUID(), ...body } })

const grantOf = (reply: { readonly body: unknown }) => (reply.body as { grant: GrantBody }).grant

const grantsOf = (token: string, state: "live" | "ended" | "all" = "all") =>
  Effect.map(
    call("GET", `/developer/account/wallet/grants?state=${state}`, { token }),
    (reply) => (reply.body as { grants: ReadonlyArray<GrantBody> }).grants
  )

const walletOf = (token: string) =>
  Effect.map(call("GET", "/developer/account/wallet", { token }), (reply) =>
    reply.body as {
      budget_usd: string
      available_usd: string
      reserved_usd: string
      version: number
      next_expiry: { at: string; free_usd: string } | null
    })

/** Every entry, oldest first. */
const entriesOf = (token: string) =>
  Effect.gen(function*() {
    const all: Array<EntryBody> = []
    let before: string | null = null
    do {
      const query: string = before === null ? "limit=500" : `limit=500&before=${before}`
      const reply = yield* call("GET", `/developer/account/wallet/ledger?${query}`, { token })
      const page = reply.body as { entries: ReadonlyArray<EntryBody>; next_before: string | null }
      all.push(...page.entries)
      before = page.next_before
    } while (before !== null)
    return all.reverse()
  })

/** amount = drawn + held + free + ended, for every grant (D21). */
const addsUp = (grant: GrantBody) =>
  expect(
    Money.format(usd(grant.drawn_usd).plus(grant.held_usd).plus(grant.free_usd).plus(grant.ended_usd)),
    `grant ${grant.id}`
  ).toBe(grant.amount_usd)

const verifyBooks = (accountId: string) =>
  Effect.flatMap(Books, (books) => books.verify(Option.some(accountId))).pipe(Effect.orDie)

/**
 * The draw-down rules as an independent model, replayed over the ledger: which grants each entry
 * should name, from the grants' terms and the entries before it.
 */
const replayDrawOrder = (grants: ReadonlyArray<GrantBody>, entries: ReadonlyArray<EntryBody>) => {
  const ordered = [...grants].sort((a, b) =>
    a.priority - b.priority ||
    (a.expires_at === null ? Infinity : Date.parse(a.expires_at)) -
      (b.expires_at === null ? Infinity : Date.parse(b.expires_at)) ||
    (a.category === b.category ? 0 : a.category === "promotional" ? -1 : 1)
  )
  const free = new Map<string, Money.Decimal>()
  const earmarks = new Map<string, Map<string, Money.Decimal>>()
  const take = (amount: Money.Decimal, into: Map<string, Money.Decimal>) => {
    let left = amount
    for (const grant of ordered) {
      const has = free.get(grant.id) ?? Money.zero
      if (left.lte(0) || has.lte(0)) continue
      const part = Money.min(has, left)
      free.set(grant.id, has.minus(part))
      into.set(grant.id, (into.get(grant.id) ?? Money.zero).plus(part))
      left = left.minus(part)
    }
  }
  const shown = (parts: Map<string, Money.Decimal>) =>
    [...parts].filter(([, amount]) => amount.gt(0)).map(([grant_id, amount]) => ({
      grant_id,
      amount_usd: Money.format(amount)
    }))
  for (const entry of entries) {
    const session = entry.session_id ?? ""
    const held = earmarks.get(session) ?? new Map<string, Money.Decimal>()
    const expected = new Map<string, Money.Decimal>()
    switch (entry.kind) {
      case "credit_added":
        for (const part of entry.grants) free.set(part.grant_id, usd(part.amount_usd))
        continue
      case "reserve":
        take(usd(entry.amount_usd), expected)
        for (const [id, amount] of expected) held.set(id, (held.get(id) ?? Money.zero).plus(amount))
        earmarks.set(session, held)
        break
      case "spend": {
        let left = usd(entry.amount_usd)
        for (const [id, amount] of held) {
          const part = Money.min(amount, left)
          if (part.lte(0)) continue
          held.set(id, amount.minus(part))
          expected.set(id, part)
          left = left.minus(part)
        }
        take(left, expected)
        break
      }
      case "reserve_release":
        for (const [id, amount] of held) {
          expected.set(id, amount)
          free.set(id, (free.get(id) ?? Money.zero).plus(amount))
        }
        earmarks.delete(session)
        break
      default:
        continue
    }
    expect(entry.grants, `entry ${entry.sequence} (${entry.kind} of ${session})`).toEqual(shown(expected))
  }
}

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "180 seconds" })("credit grants (D21)", (it) => {
  describe("bad input", () => {
    it.scoped("is a 422 at the field, a 403, 404 or 409 for a void, and changes nothing", () =>
      Effect.gen(function*() {
        const { token } = yield* admin("10")
        const before = yield* walletOf(token)
        const refusedAt = (body: Record<string, unknown>, pointer: string) =>
          Effect.gen(function*() {
            const reply = yield* credit(token, { amount_usd: "5", ...body })
            expect(reply.status, JSON.stringify(body)).toBe(422)
            expect(JSON.stringify(reply.body), JSON.stringify(body)).toContain(pointer)
          })
        yield* refusedAt({ expires_at: inSeconds(-60) }, "#/expires_at")
        yield* refusedAt({ expires_at: "2030-01-01T00:00:00" }, "#/expires_at")
        yield* refusedAt({ expires_at: inSeconds(5.1 * 365 * 86_400) }, "#/expires_at")
        for (const priority of [101, -1, 1.5, "10"]) yield* refusedAt({ priority }, "#/priority")
        yield* refusedAt({ category: "gift" }, "#/category")
        expect(yield* walletOf(token)).toEqual(before)
        expect(yield* grantsOf(token)).toEqual([])

        const grant = grantOf(yield* credit(token, { amount_usd: "5", note: "Trial" }))
        const other = yield* admin("1")
        const voidOf = (as: string, id: string) =>
          call("POST", `/developer/account/wallet/grants/${id}/void`, {
            token: as,
            body: { idempotency_key: randomUUID() }
          })
        expect((yield* voidOf(other.token, grant.id)).status).toBe(404)
        expect((yield* voidOf(token, "not-a-grant")).status).toBe(404)
        const member = yield* signedInUser()
        expect((yield* voidOf(member.token, grant.id)).status).toBe(403)
        const voided = yield* voidOf(token, grant.id)
        expect(voided.status).toBe(200)
        expect(voided.body).toMatchObject({
          id: grant.id,
          state: "voided",
          free_usd: "0.000000",
          ended_usd: "5.000000"
        })
        const again = yield* voidOf(token, grant.id)
        expect(again.status).toBe(409)
        expect(again.body).toMatchObject({ code: "grant_not_live", state: "voided" })
        expect(yield* walletOf(token)).toMatchObject({ budget_usd: "10.000000", version: 3 })
      }))

    it.scoped("a credit replays under its key only with the same terms; a time is compared as the moment it names", () =>
      Effect.gen(function*() {
        const { token } = yield* admin("0")
        const key = randomUUID()
        const at = new Date(Date.now() + 86_400_000)
        const body = { amount_usd: "3", expires_at: at.toISOString(), priority: 10, idempotency_key: key }
        const first = yield* credit(token, body)
        expect(first.status).toBe(200)
        const offset = new Date(at.getTime() + 3_600_000).toISOString().replace("Z", "+01:00")
        const replay = yield* credit(token, { ...body, expires_at: offset })
        expect(replay.status).toBe(200)
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(replay.body).toEqual(first.body)
        expect((yield* credit(token, { ...body, priority: 11 })).status).toBe(422)
        expect(yield* grantsOf(token)).toHaveLength(1)
      }))
  })

  describe("the draw-down order", () => {
    it.scoped("40 concurrent sessions draw three grants and the base exactly in the stated order; each adds up", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { id: accountId, token } = yield* admin("20")
        const never = grantOf(yield* credit(token, { amount_usd: "8", note: "paid, never" }))
        const promotional = grantOf(
          yield* credit(token, { amount_usd: "8", category: "promotional", expires_at: inSeconds(10 * 86_400) })
        )
        const first = grantOf(
          yield* credit(token, { amount_usd: "8", priority: 20, expires_at: inSeconds(20 * 86_400) })
        )
        expect((yield* grantsOf(token, "live")).map((grant) => grant.id)).toEqual([first.id, promotional.id, never.id])
        expect((yield* walletOf(token)).next_expiry).toEqual({ at: promotional.expires_at, free_usd: "8.000000" })

        let polling = true
        const poll = Effect.gen(function*() {
          let reads = 0
          while (polling) {
            for (const grant of yield* grantsOf(token)) addsUp(grant)
            reads += 1
            yield* Effect.sleep("20 millis")
          }
          return reads
        })
        const session = (i: number) =>
          Effect.gen(function*() {
            const base = { account_id: accountId, session_id: `run-${i}` }
            const reserve = yield* send("reserve", { ...base, amount_usd: "1", idempotency_key: `r-${i}` })
            expect(reserve.result, reserve.failed).toMatchObject({ status: "applied" })
            const spend = yield* send("spend", { ...base, amount_usd: "0.75", idempotency_key: `s-${i}` })
            expect(spend.result, spend.failed).toMatchObject({ status: "applied" })
            const release = yield* send("release", { ...base, idempotency_key: `x-${i}` })
            expect(release.result, release.failed).toMatchObject({ status: "applied" })
          })
        const [reads] = yield* Effect.all([
          poll,
          Effect.ensuring(
            Effect.forEach(Array.from({ length: 40 }, (_, i) => i), session, { concurrency: "unbounded" }),
            Effect.sync(() => (polling = false))
          )
        ], { concurrency: "unbounded" })
        expect(reads).toBeGreaterThan(0)
        const grants = yield* grantsOf(token)
        for (const grant of grants) addsUp(grant)
        // 40 × 0.75 = 30 spent; which of it the grants paid depends on when holds came back (a
        // hold on the base draws a grant freed meanwhile), so the replay below judges every entry.
        expect(grants.every((grant) => grant.held_usd === "0.000000" && usd(grant.drawn_usd).gt(0))).toBe(true)
        replayDrawOrder(grants, yield* entriesOf(token))
        expect(yield* walletOf(token)).toMatchObject({ budget_usd: "44.000000", available_usd: "14.000000" })
        expect((yield* verifyBooks(accountId)).mismatches).toEqual([])
      }))
  })

  describe("expiry", () => {
    it.scoped("a grant expiring under 10 held sessions: their spends still draw it, their releases expire the rest", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { id: accountId, token } = yield* admin("100")
        const expiresAt = inSeconds(4)
        const grant = grantOf(yield* credit(token, { amount_usd: "15", priority: 0, expires_at: expiresAt }))
        const base = (i: number) => ({ account_id: accountId, session_id: `held-${i}` })
        yield* Effect.forEach(
          Array.from({ length: 10 }, (_, i) => i),
          (i) =>
            Effect.map(
              send("reserve", { ...base(i), amount_usd: "1", idempotency_key: `r-${i}` }),
              (answer) => expect(answer.result, answer.failed).toMatchObject({ status: "applied" })
            ),
          { concurrency: "unbounded" }
        )
        expect(yield* walletOf(token)).toMatchObject({ available_usd: "105.000000" })
        // Past expires_at, the wallet read leaves its free amount out at once, entry or not.
        yield* Effect.sleep(Duration.millis(Math.max(0, Date.parse(expiresAt) - Date.now()) + 200))
        expect(yield* walletOf(token)).toMatchObject({ budget_usd: "110.000000", available_usd: "100.000000" })
        // Nothing new draws it: a new session's hold is on the base alone.
        const late = yield* send("reserve", {
          account_id: accountId,
          session_id: "late",
          amount_usd: "2",
          idempotency_key: "late"
        })
        expect(late.result, late.failed).toMatchObject({ status: "applied" })
        yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) =>
          Effect.gen(function*() {
            const spend = yield* send("spend", { ...base(i), amount_usd: "0.6", idempotency_key: `s-${i}` })
            expect(spend.result, spend.failed).toMatchObject({ status: "applied" })
            const wallet = yield* walletOf(token)
            expect(usd(wallet.available_usd).lte(100), "available never counts expired money").toBe(true)
            const release = yield* send("release", { ...base(i), idempotency_key: `x-${i}` })
            expect(release.result, release.failed).toMatchObject({ status: "applied" })
          }), { concurrency: "unbounded" })
        const [after] = (yield* grantsOf(token)).filter((g) => g.id === grant.id)
        expect(after).toMatchObject({
          state: "expired",
          drawn_usd: "6.000000",
          held_usd: "0.000000",
          free_usd: "0.000000",
          ended_usd: "9.000000"
        })
        const entries = yield* entriesOf(token)
        const expired = entries.filter((entry) => entry.kind === "credit_expired")
        // One for its free amount, then one per hold that came back to it.
        expect(expired.map((entry) => entry.amount_usd).sort()).toEqual([
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "0.400000",
          "5.000000"
        ])
        expect(expired.every((entry) => entry.grants[0]?.grant_id === grant.id)).toBe(true)
        expect(entries.find((entry) => entry.kind === "reserve" && entry.session_id === "late")?.grants).toEqual([])
        for (const entry of entries.filter((e) => e.kind === "spend")) {
          expect(entry.grants).toEqual([{ grant_id: grant.id, amount_usd: "0.600000" }])
        }
        const events = yield* call("GET", "/developer/account/events?type=grant.expired", { token })
        expect((events.body as { events: ReadonlyArray<unknown> }).events).toHaveLength(1)
        expect((yield* verifyBooks(accountId)).mismatches).toEqual([])
      }))

    it.scoped(
      "a grant expiring with nothing running gets its credit_expired entry within 60 s, by the worker alone",
      () =>
        Effect.gen(function*() {
          const { id: accountId, token } = yield* admin("1")
          const expiresAt = inSeconds(2)
          const grant = grantOf(yield* credit(token, { amount_usd: "2.5", expires_at: expiresAt }))
          const sql = yield* SqlClient.SqlClient
          let written: Date | undefined
          while (written === undefined && Date.now() < Date.parse(expiresAt) + 70_000) {
            const rows = yield* sql<{ created_at: Date }>`
            SELECT created_at FROM ledger_entries
            WHERE kind = 'credit_expired' AND grants @> ${JSON.stringify([{ grant_id: grant.id }])}::jsonb`.pipe(
              Effect.orDie
            )
            written = rows[0]?.created_at
            if (written === undefined) yield* Effect.sleep("500 millis")
          }
          expect(written, "its credit_expired entry").toBeDefined()
          expect((written?.getTime() ?? Infinity) - Date.parse(expiresAt)).toBeLessThan(60_000)
          expect(yield* walletOf(token)).toMatchObject({ budget_usd: "1.000000", next_expiry: null })
          expect((yield* verifyBooks(accountId)).mismatches).toEqual([])
        }),
      90_000
    )
  })

  describe("warnings ahead of expiry", () => {
    it.scoped(
      "grant.expiring comes 1 day ahead, by the worker alone; the 7-day one, due before the grant was made, never",
      () =>
        Effect.gen(function*() {
          const { token } = yield* admin("0")
          // Its 1-day moment is 3 s from now; its 7-day one was six days before it was made.
          const grant = grantOf(yield* credit(token, { amount_usd: "4", expires_at: inSeconds(86_400 + 3) }))
          let warnings: ReadonlyArray<{ data: { grant: GrantBody; free_usd: string; days_left: number } }> = []
          const deadline = Date.now() + 75_000
          while (warnings.length === 0 && Date.now() < deadline) {
            yield* Effect.sleep("500 millis")
            const page = yield* call("GET", "/developer/account/events?type=grant.expiring", { token })
            warnings = (page.body as { events: typeof warnings }).events
          }
          expect(warnings.map((event) => [event.data.grant.id, event.data.days_left, event.data.free_usd])).toEqual([
            [grant.id, 1, "4.000000"]
          ])
          // Once: later sweeps send nothing more.
          yield* Effect.sleep("16 seconds")
          const again = yield* call("GET", "/developer/account/events?type=grant.expiring", { token })
          expect((again.body as { events: ReadonlyArray<unknown> }).events).toHaveLength(1)
        }),
      120_000
    )
  })

  describe("the budget's floor", () => {
    it.scoped("a PUT below spent + reserved + the live grants' free amounts is 409 with that floor", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { id: accountId, token } = yield* admin("4")
        yield* credit(token, { amount_usd: "6" })
        const reserve = yield* send("reserve", {
          account_id: accountId,
          session_id: "s",
          amount_usd: "7",
          idempotency_key: "r"
        })
        expect(reserve.result, reserve.failed).toMatchObject({ status: "applied" })
        // 7 reserved (6 on the grant, 1 on the base), nothing free of the grant: the floor is 7.
        const wallet = yield* walletOf(token)
        const low = yield* call("PUT", "/developer/account/wallet", {
          token,
          body: { budget_usd: "6.99", expected_version: wallet.version, idempotency_key: randomUUID() }
        })
        expect(low.status).toBe(409)
        expect(low.body).toMatchObject({ code: "budget_below_committed", minimum_budget_usd: "7.000000" })
        const release = yield* send("release", { account_id: accountId, session_id: "s", idempotency_key: "x" })
        expect(release.result, release.failed).toMatchObject({ status: "applied" })
        // Released: the grant's 6 is free again and counts, the base's 1 does not.
        const lower = yield* call("PUT", "/developer/account/wallet", {
          token,
          body: { budget_usd: "5.99", expected_version: wallet.version, idempotency_key: randomUUID() }
        })
        expect(lower.body).toMatchObject({ code: "budget_below_committed", minimum_budget_usd: "6.000000" })
        const fits = yield* call("PUT", "/developer/account/wallet", {
          token,
          body: { budget_usd: "6", expected_version: wallet.version, idempotency_key: randomUUID() }
        })
        expect(fits.status).toBe(200)
        expect(yield* walletOf(token)).toMatchObject({ budget_usd: "6.000000", available_usd: "6.000000" })
      }))
  })
})
