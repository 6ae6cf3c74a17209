import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { parse } from "csv-parse/sync"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { serveOn } from "../src/Http.js"
import { Wallets } from "../src/Wallets.js"
import { createOrganisation, createRepository } from "./support/policies.js"
import { plainRunner, saveLimits } from "./support/spendControls.js"
import { call, createUser, signIn } from "./support/TestApp.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * D16 (docs/decisions/D16-spend-controls.md) as a runner meets it through plain BullMQ, and as a
 * member reads it back over HTTP: attribution checked against the job's account and carried on
 * sessions and entries, session caps, and limits of the account, a repository and a user.
 */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(
  Layer.provideMerge(Books.Default.pipe(Layer.provideMerge(TestSettlement())))
)

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

/** An organisation's account with a member (signed in), two repositories, and a wallet budget (enforced) or none. */
const organisation = (budget?: string) =>
  Effect.gen(function*() {
    const orgId = yield* createOrganisation(`Acme ${randomUUID()}`)
    const account: Account = { kind: "client", id: orgId }
    const member = yield* createUser({ organisationId: orgId })
    const token = yield* signIn(member.email)
    const repository = yield* createRepository(orgId)
    const otherRepository = yield* createRepository(orgId)
    if (budget !== undefined) {
      yield* Effect.orDie(
        Effect.flatMap(Wallets, (wallets) => wallets.setBudget(account, { budget_usd: Money.decimal(budget) }))
      )
    }
    return { account, member, token, repository, otherRepository }
  })

const totalsOf = (account: Account) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<
      {
        repository_id: string | null
        user_id: string | null
        spent_usd: string
        unfunded_usd: string
        sessions: number
      }
    >`
      SELECT t.repository_id, t.user_id, t.spent_usd::text AS spent_usd, t.unfunded_usd::text AS unfunded_usd, t.sessions
      FROM settlement_spend_totals t JOIN wallets w ON w.id = t.wallet_id
      WHERE w.account_id = ${account.id}
      ORDER BY t.spent_usd DESC`
  }).pipe(Effect.orDie)

const verifyBooks = (account: Account) =>
  Effect.flatMap(Books, (books) => books.verify(Option.some(account.id))).pipe(Effect.orDie)

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "90 seconds" })("spend controls (D16)", (it) => {
  describe("attribution", () => {
    it.scoped("a repository or user not of the job's account fails the reserve at once with its code, applying nothing", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, member, repository } = yield* organisation("100")
        const stranger = yield* organisation("100")
        const loner = yield* newAccount("1")
        const reserve = (session_id: string, extra: Record<string, string>) =>
          send("reserve", {
            account_id: account.id,
            session_id,
            amount_usd: "1",
            idempotency_key: randomUUID(),
            ...extra
          })
        const foreignRepository = yield* reserve("r-1", { repository_id: stranger.repository })
        expect(foreignRepository.failed).toMatch(/^repository_not_found: /)
        expect((yield* reserve("r-2", { repository_id: randomUUID() })).failed).toMatch(/^repository_not_found: /)
        // A user of another organisation, a user with an account of their own, or no user at all.
        for (const user_id of [stranger.member.id, loner.id, randomUUID()]) {
          expect((yield* reserve("r-3", { user_id })).failed).toMatch(/^user_not_found: /)
        }
        // The repository is checked first.
        expect((yield* reserve("r-4", { repository_id: randomUUID(), user_id: randomUUID() })).failed).toMatch(
          /^repository_not_found: /
        )
        expect((yield* reserve("r-5", { repository_id: repository, user_id: member.id })).result).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "1.000000" }
        })
        // A user's own account: the user is of it.
        expect(
          (yield* send("reserve", {
            account_id: loner.id,
            session_id: "mine",
            amount_usd: "1",
            idempotency_key: randomUUID(),
            user_id: loner.id
          })).result
        ).toMatchObject({ status: "applied" })
        expect(yield* totalsOf(account)).toEqual([])
      }))

    it.scoped("is set by a session's first reserve, carried on its entries, sessions view, export and running totals", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, member, otherRepository, repository, token } = yield* organisation("100")
        const base = { account_id: account.id, session_id: "attributed" }
        expect(
          (yield* send("reserve", {
            ...base,
            amount_usd: "2",
            idempotency_key: randomUUID(),
            repository_id: repository,
            user_id: member.id
          })).result
        ).toMatchObject({ status: "applied" })
        // A later reserve may leave it out; naming another is refused, applying nothing.
        expect((yield* send("reserve", { ...base, amount_usd: "1", idempotency_key: randomUUID() })).result)
          .toMatchObject({ status: "applied", wallet: { reserved_usd: "3.000000" } })
        // The same repository in upper case is the same id, as PostgreSQL reads it.
        expect(
          (yield* send("reserve", {
            ...base,
            amount_usd: "0.5",
            idempotency_key: randomUUID(),
            repository_id: repository.toUpperCase()
          })).result
        ).toMatchObject({ status: "applied", wallet: { reserved_usd: "3.500000" } })
        const mismatch = yield* send("reserve", {
          ...base,
          amount_usd: "1",
          idempotency_key: randomUUID(),
          repository_id: otherRepository
        })
        expect(mismatch.failed).toMatch(/^session_attribution_mismatch: /)
        expect((yield* send("spend", { ...base, amount_usd: "4", idempotency_key: randomUUID() })).result)
          .toMatchObject({ status: "applied", unfunded_usd: "0.500000", wallet: { reserved_usd: "0.000000" } })
        yield* send("reserve", {
          account_id: account.id,
          session_id: "plain",
          amount_usd: "1",
          idempotency_key: randomUUID()
        })
        yield* send("spend", {
          account_id: account.id,
          session_id: "plain",
          amount_usd: "0.5",
          idempotency_key: randomUUID()
        })

        const sessions = (yield* call("GET", "/developer/account/wallet/sessions?state=all", { token })).body as {
          sessions: ReadonlyArray<Record<string, unknown>>
        }
        expect(sessions.sessions.map((s) => [s.session_id, s.repository_id, s.user_id])).toEqual([
          ["plain", null, null],
          ["attributed", repository, member.id]
        ])
        const ledger = (yield* call("GET", "/developer/account/wallet/ledger?limit=10", { token })).body as {
          entries: ReadonlyArray<Record<string, unknown>>
        }
        expect(ledger.entries.map((e) => [e.kind, e.session_id, e.repository_id, e.user_id]).reverse()).toEqual([
          ["budget_set", null, null, null],
          ["reserve", "attributed", repository, member.id],
          ["reserve", "attributed", repository, member.id],
          ["reserve", "attributed", repository, member.id],
          ["spend", "attributed", repository, member.id],
          ["reserve", "plain", null, null],
          ["spend", "plain", null, null]
        ])
        const csv = String((yield* call("GET", "/developer/account/wallet/ledger.csv", { token })).body)
        const rows = parse(csv, { columns: true }) as Array<Record<string, string>>
        expect(rows.map((row) => [row.kind, row.repository_id, row.user_id])).toEqual(
          ledger.entries.map((e) => [e.kind, e.repository_id ?? "", e.user_id ?? ""]).reverse()
        )
        expect(yield* totalsOf(account)).toEqual([
          {
            repository_id: repository,
            user_id: member.id,
            spent_usd: "4.000000",
            unfunded_usd: "0.500000",
            sessions: 1
          },
          { repository_id: null, user_id: null, spent_usd: "0.500000", unfunded_usd: "0.000000", sessions: 1 }
        ])
        expect((yield* verifyBooks(account)).mismatches).toEqual([])
      }))
  })

  describe("session caps (max_usd)", () => {
    it.scoped("a reserve past the cap completes limit_reached with the cap; spends reaching it carry cap_reached", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const account = yield* newAccount("100")
        const base = { account_id: account.id, session_id: "capped" }
        expect(
          (yield* send("reserve", { ...base, amount_usd: "3", max_usd: "5", idempotency_key: randomUUID() })).result
        ).toMatchObject({ status: "applied" })
        const key = randomUUID()
        const refused = yield* send("reserve", { ...base, amount_usd: "2.5", idempotency_key: key })
        expect(refused.result).toEqual({
          status: "limit_reached",
          entry_ids: [],
          // What the cap still leaves (D19): 5 - 3.
          max_reservable_usd: "2.000000",
          wallet: expect.objectContaining({ reserved_usd: "3.000000" }),
          limit: {
            id: null,
            scope: "session",
            scope_id: null,
            period: "session",
            amount_usd: "5.000000",
            used_usd: "3.000000"
          }
        })
        // Recorded as every outcome: its duplicate answers the same limit, even once it would fit.
        yield* send("release", { ...base, idempotency_key: randomUUID() })
        expect((yield* send("reserve", { ...base, amount_usd: "2.5", idempotency_key: key })).result).toMatchObject({
          status: "duplicate",
          first_status: "limit_reached",
          limit: { amount_usd: "5.000000", used_usd: "3.000000" }
        })

        const run = { account_id: account.id, session_id: "capped-2" }
        yield* send("reserve", { ...run, amount_usd: "4", max_usd: "4", idempotency_key: randomUUID() })
        const spend = (amount_usd: string, idempotency_key = randomUUID()) =>
          Effect.map(send("spend", { ...run, amount_usd, idempotency_key }), (answer) => answer.result)
        const first = yield* spend("3")
        expect(first).toMatchObject({ status: "applied" })
        expect(first).not.toHaveProperty("cap_reached")
        const reaching = randomUUID()
        expect(yield* spend("1", reaching)).toMatchObject({ status: "applied", cap_reached: true })
        // Spends are never refused: booked in full, beyond the cap, still saying so.
        expect(yield* spend("2")).toMatchObject({ status: "applied", cap_reached: true, unfunded_usd: "2.000000" })
        expect(yield* spend("1", reaching)).toMatchObject({ status: "duplicate", cap_reached: true })
        expect((yield* verifyBooks(account)).mismatches).toEqual([])
      }))
  })

  describe("limits", () => {
    it.scoped("an account's, a repository's and a user's limits refuse the reserve that would pass them, on an unenforced wallet too", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        // No budget: the wallet is not enforced, and every hold would be granted but for the limits.
        const { account, member, repository } = yield* organisation()
        const saved = yield* saveLimits(account, [
          { scope: "account", scope_id: null, period: "day", amount_usd: "10" },
          { scope: "repository", scope_id: repository, period: "week", amount_usd: "4" },
          { scope: "user", scope_id: member.id, period: "month", amount_usd: "3" }
        ])
        const idOf = (scope: string) => saved.find((limit) => limit.scope === scope)?.id
        const reserve = (session_id: string, amount_usd: string, extra: Record<string, string> = {}) =>
          Effect.map(
            send("reserve", {
              account_id: account.id,
              session_id,
              amount_usd,
              idempotency_key: randomUUID(),
              ...extra
            }),
            (answer) => answer.result
          )
        expect(yield* reserve("repo-1", "4", { repository_id: repository })).toMatchObject({ status: "applied" })
        expect(yield* reserve("repo-2", "0.5", { repository_id: repository })).toMatchObject({
          status: "limit_reached",
          limit: {
            id: idOf("repository"),
            scope: "repository",
            scope_id: repository,
            period: "week",
            amount_usd: "4.000000",
            used_usd: "4.000000"
          }
        })
        expect(yield* reserve("user-1", "3", { user_id: member.id })).toMatchObject({ status: "applied" })
        expect(yield* reserve("user-2", "0.5", { user_id: member.id })).toMatchObject({
          status: "limit_reached",
          limit: { id: idOf("user"), scope: "user", scope_id: member.id, period: "month", used_usd: "3.000000" }
        })
        expect(yield* reserve("plain-1", "3")).toMatchObject({ status: "applied" })
        expect(yield* reserve("plain-2", "0.01")).toMatchObject({
          status: "limit_reached",
          limit: { id: idOf("account"), scope: "account", scope_id: null, period: "day", used_usd: "10.000000" }
        })
        // A spend within its hold moves nothing of a limit's use; a release frees the hold.
        yield* send("spend", {
          account_id: account.id,
          session_id: "repo-1",
          amount_usd: "1",
          idempotency_key: randomUUID()
        })
        yield* send("release", { account_id: account.id, session_id: "repo-1", idempotency_key: randomUUID() })
        // The user's hold goes too; the repository spent 1 this week: 3 more fit it, not 3.5.
        yield* send("release", { account_id: account.id, session_id: "user-1", idempotency_key: randomUUID() })
        expect(yield* reserve("repo-3", "3.5", { repository_id: repository })).toMatchObject({
          status: "limit_reached",
          limit: { scope: "repository", used_usd: "1.000000" }
        })
        expect(yield* reserve("repo-3", "3", { repository_id: repository })).toMatchObject({ status: "applied" })
        // The account: 3 held by plain-1, 3 by repo-3, 1 spent; 3 more fit, not 3.5.
        expect(yield* reserve("plain-3", "3.5")).toMatchObject({
          status: "limit_reached",
          limit: { scope: "account", used_usd: "7.000000" }
        })
        // A refused reserve made its session known: its release answers at once.
        const release = yield* send("release", {
          account_id: account.id,
          session_id: "plain-2",
          idempotency_key: randomUUID()
        })
        expect(release.result).toMatchObject({ status: "nothing_to_release" })
        expect((yield* verifyBooks(account)).mismatches).toEqual([])
      }))

    it.scoped("the account's session limit caps every session, and is named when it is the one passed", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const account = yield* newAccount("100")
        const [sessionLimit] = yield* saveLimits(account, [
          { scope: "session", scope_id: null, period: "session", amount_usd: "2" }
        ])
        const base = { account_id: account.id, amount_usd: "2.5" }
        // A runner's own max_usd does not lift the account's session limit.
        for (const extra of [{}, { max_usd: "10" }]) {
          expect(
            (yield* send("reserve", { ...base, session_id: randomUUID(), idempotency_key: randomUUID(), ...extra }))
              .result
          ).toMatchObject({
            status: "limit_reached",
            limit: { id: sessionLimit?.id, scope: "session", period: "session", amount_usd: "2.000000" }
          })
        }
        const session_id = randomUUID()
        yield* send("reserve", { account_id: account.id, session_id, amount_usd: "2", idempotency_key: randomUUID() })
        expect(
          (yield* send("spend", { account_id: account.id, session_id, amount_usd: "2", idempotency_key: randomUUID() }))
            .result
        ).toMatchObject({ status: "applied", cap_reached: true })
      }))
  })
})
