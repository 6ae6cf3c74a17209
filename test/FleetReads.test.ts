import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { parse } from "csv-parse/sync"
import { Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { LEDGER_CSV_COLUMNS, LedgerPage } from "../src/Domain/Wallet.js"
import { Wallets } from "../src/Wallets.js"
import { WalletLedger } from "../src/Wallets/Ledger.js"
import { createOrganisation, createRepository, pointers, problem } from "./support/policies.js"
import { call, createUser, type Reply, signedInUser, signIn, TestApp } from "./support/TestApp.js"

/**
 * Labels and models as clients read them (D19, docs/decisions/D19-fleet-controls.md): on sessions
 * (D12), on ledger entries and in the export (D7, D13), and the spend report by one to three
 * dimensions. The settlement batch writes them; here the ledger's own writer books movements that
 * carry them, and the sessions and running totals are arranged with SQL.
 */

const TestLayer = Layer.mergeAll(Wallets.Default, WalletLedger.Default, Books.Default).pipe(
  Layer.provideMerge(TestApp())
)

const SPEND = "/developer/account/spend"
const WALLET = "/developer/account/wallet"
const usd = Money.decimal

const bodyOf = (reply: Reply) => reply.body as Record<string, unknown>

interface GroupBody {
  readonly key?: string | null
  readonly keys: ReadonlyArray<string | null>
  readonly spent_usd: string
  readonly unfunded_usd: string
  readonly sessions: number
}

interface ReportBody {
  readonly from: string
  readonly to: string
  readonly group_by: string
  readonly groups: ReadonlyArray<GroupBody>
  readonly total: { readonly spent_usd: string; readonly unfunded_usd: string; readonly sessions: number }
}

/** Micro-dollars, so sums are exact. */
const micros = (amount: string) => BigInt(amount.replace(".", ""))

/** The groups add up to the total: spent, unfunded and sessions (nothing left out below 1,000 groups). */
const expectGroupsSumToTotal = (report: ReportBody) => {
  const sum = (field: "spent_usd" | "unfunded_usd") => report.groups.reduce((all, g) => all + micros(g[field]), 0n)
  expect(sum("spent_usd")).toBe(micros(report.total.spent_usd))
  expect(sum("unfunded_usd")).toBe(micros(report.total.unfunded_usd))
  expect(report.groups.reduce((all, g) => all + g.sessions, 0)).toBe(report.total.sessions)
}

/** A group as the report lists it: `key` only with one dimension. */
const group = (keys: ReadonlyArray<string | null>, spent_usd: string, sessions: number, unfunded_usd = "0.000000") =>
  keys.length === 1
    ? { key: keys[0], keys, spent_usd, unfunded_usd, sessions }
    : { keys, spent_usd, unfunded_usd, sessions }

interface TotalsRow {
  readonly day: string
  readonly repository_id?: string | null
  readonly user_id?: string | null
  readonly model?: string | null
  readonly labels?: Readonly<Record<string, string>> | null
  readonly spent_usd: string
  readonly unfunded_usd?: string
  readonly sessions?: number
}

/** Running totals as the settlement transaction leaves them (D19: per model and labels too). */
const seedTotals = (walletId: string, rows: ReadonlyArray<TotalsRow>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const row of rows) {
      const labels = row.labels === undefined || row.labels === null ? null : JSON.stringify(row.labels)
      yield* sql`
        INSERT INTO settlement_spend_totals
          (wallet_id, day, repository_id, user_id, model, labels, spent_usd, unfunded_usd, sessions)
        VALUES (${walletId}, ${row.day}::date, ${row.repository_id ?? null}, ${row.user_id ?? null},
                ${row.model ?? null}, ${labels}::jsonb, ${row.spent_usd}::numeric, ${row.unfunded_usd ?? "0"}::numeric,
                ${row.sessions ?? 1})`
    }
  }).pipe(Effect.orDie)

/** An organisation with an administrator and a member (both signed in), two repositories, and March 2026's totals. */
const march = Effect.gen(function*() {
  const orgId = yield* createOrganisation(`Org ${randomUUID().slice(0, 8)}`)
  const admin = yield* createUser({ admin: true, organisationId: orgId })
  const member = yield* createUser({ organisationId: orgId })
  const token = yield* signIn(member.email)
  const [r1, r2] = [yield* createRepository(orgId), yield* createRepository(orgId)]
  const [u1, u2] = [member.id, admin.id]
  const walletId = String(bodyOf(yield* call("GET", WALLET, { token })).id)
  yield* seedTotals(walletId, [
    { day: "2026-02-28", repository_id: r1, model: "sonnet", labels: { team: "search" }, spent_usd: "50" },
    {
      day: "2026-03-02",
      repository_id: r1,
      user_id: u1,
      model: "sonnet",
      labels: { team: "search", "cost.center": "42" },
      spent_usd: "5",
      sessions: 2
    },
    {
      day: "2026-03-02",
      repository_id: r1,
      user_id: u1,
      model: "haiku",
      labels: { team: "search", "cost.center": "42" },
      spent_usd: "1",
      sessions: 0
    },
    {
      day: "2026-03-02",
      repository_id: r2,
      user_id: u1,
      model: "sonnet",
      labels: { team: "ads", env: "prod" },
      spent_usd: "1.5",
      unfunded_usd: "0.5"
    },
    { day: "2026-03-05", repository_id: r1, user_id: u2, spent_usd: "2.25" },
    { day: "2026-03-05", model: "haiku", labels: { env: "prod" }, spent_usd: "0.75" },
    { day: "2026-03-31", repository_id: r2, user_id: u2, model: "sonnet", spent_usd: "4" },
    { day: "2026-04-01", repository_id: r1, user_id: u1, model: "sonnet", labels: { team: "search" }, spent_usd: "100" }
  ])
  return { token, walletId, r1, r2, u1, u2 }
})

const report = (token: string, groupBy: string, window = "&from=2026-03-01&to=2026-04-01") =>
  Effect.map(
    call("GET", `${SPEND}?group_by=${encodeURIComponent(groupBy)}${window}`, { token }),
    (reply) => ({ status: reply.status, body: reply.body as ReportBody, reply })
  )

const MARCH_TOTAL = { spent_usd: "14.500000", unfunded_usd: "0.500000", sessions: 6 }

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("labels and models, read (D19)", (it) => {
  describe("GET /developer/account/spend by several dimensions", () => {
    it.effect("one dimension: model or a label; key and keys both, null for none, the total as D16's", () =>
      Effect.gen(function*() {
        const { token } = yield* march
        const byModel = yield* report(token, "model")
        expect(byModel.status).toBe(200)
        expect(byModel.body).toEqual({
          from: "2026-03-01T00:00:00.000Z",
          to: "2026-04-01T00:00:00.000Z",
          group_by: "model",
          groups: [
            group(["sonnet"], "10.500000", 4, "0.500000"),
            group([null], "2.250000", 1),
            group(["haiku"], "1.750000", 1)
          ],
          total: MARCH_TOTAL
        })
        const byTeam = yield* report(token, "label:team")
        expect(byTeam.body.group_by).toBe("label:team")
        expect(byTeam.body.groups).toEqual([
          group([null], "7.000000", 3),
          group(["search"], "6.000000", 2),
          group(["ads"], "1.500000", 1, "0.500000")
        ])
        // A key with the characters a label key may hold beside letters.
        const byCostCenter = yield* report(token, "label:cost.center")
        expect(byCostCenter.body.groups).toEqual([
          group([null], "8.500000", 4, "0.500000"),
          group(["42"], "6.000000", 2)
        ])
        for (const answer of [byModel, byTeam, byCostCenter]) {
          expect(answer.body.total).toEqual(MARCH_TOTAL)
          expectGroupsSumToTotal(answer.body)
        }
      }))

    it.effect("two dimensions: keys in the order asked, no key, largest spend first", () =>
      Effect.gen(function*() {
        const { r1, r2, token } = yield* march
        const byRepositoryModel = yield* report(token, "repository,model")
        expect(byRepositoryModel.status).toBe(200)
        expect(byRepositoryModel.body.group_by).toBe("repository,model")
        expect(byRepositoryModel.body.groups).toEqual([
          group([r2, "sonnet"], "5.500000", 2, "0.500000"),
          group([r1, "sonnet"], "5.000000", 2),
          group([r1, null], "2.250000", 1),
          group([r1, "haiku"], "1.000000", 0),
          group([null, "haiku"], "0.750000", 1)
        ])
        for (const one of byRepositoryModel.body.groups) expect(one).not.toHaveProperty("key")
        const byEnvModel = yield* report(token, "label:env,model")
        expect(byEnvModel.body.groups).toEqual([
          group([null, "sonnet"], "9.000000", 3),
          group([null, null], "2.250000", 1),
          group(["prod", "sonnet"], "1.500000", 1, "0.500000"),
          group([null, "haiku"], "1.000000", 0),
          group(["prod", "haiku"], "0.750000", 1)
        ])
        for (const answer of [byRepositoryModel, byEnvModel]) {
          expect(answer.body.total).toEqual(MARCH_TOTAL)
          expectGroupsSumToTotal(answer.body)
        }
      }))

    it.effect("with day or month: by time first, oldest first, then largest spend; three dimensions at once", () =>
      Effect.gen(function*() {
        const { token } = yield* march
        const three = yield* report(token, "day,model,label:team")
        expect(three.status).toBe(200)
        expect(three.body.group_by).toBe("day,model,label:team")
        expect(three.body.groups).toEqual([
          group(["2026-03-02", "sonnet", "search"], "5.000000", 2),
          group(["2026-03-02", "sonnet", "ads"], "1.500000", 1, "0.500000"),
          group(["2026-03-02", "haiku", "search"], "1.000000", 0),
          group(["2026-03-05", null, null], "2.250000", 1),
          group(["2026-03-05", "haiku", null], "0.750000", 1),
          group(["2026-03-31", "sonnet", null], "4.000000", 1)
        ])
        // The time dimension orders first wherever it is named; keys stay in the order asked.
        const modelByDay = yield* report(token, "model,day")
        expect(modelByDay.body.groups).toEqual([
          group(["sonnet", "2026-03-02"], "6.500000", 3, "0.500000"),
          group(["haiku", "2026-03-02"], "1.000000", 0),
          group([null, "2026-03-05"], "2.250000", 1),
          group(["haiku", "2026-03-05"], "0.750000", 1),
          group(["sonnet", "2026-03-31"], "4.000000", 1)
        ])
        const byMonth = yield* report(token, "label:team,month", "&from=2026-02-01&to=2026-05-01")
        expect(byMonth.body.groups).toEqual([
          group(["search", "2026-02"], "50.000000", 1),
          group([null, "2026-03"], "7.000000", 3),
          group(["search", "2026-03"], "6.000000", 2),
          group(["ads", "2026-03"], "1.500000", 1, "0.500000"),
          group(["search", "2026-04"], "100.000000", 1)
        ])
        for (const answer of [three, modelByDay, byMonth]) expectGroupsSumToTotal(answer.body)
        expect(three.body.total).toEqual(MARCH_TOTAL)
      }))

    it.effect("beyond 1,000 groups the smallest spends are left out, listed by time; the total counts every group", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const walletId = String(bodyOf(yield* call("GET", WALLET, { token: user.token })).id)
        const sql = yield* SqlClient.SqlClient
        // 1,001 models and no model spent 1 each on 10 June, "a" 0.5 on 9 June: 1,003 groups of (day, model).
        yield* sql`
          INSERT INTO settlement_spend_totals (wallet_id, day, model, spent_usd, sessions)
          SELECT ${walletId}, '2026-06-10', 'm-' || lpad(n::text, 4, '0'), 1, 1 FROM generate_series(1, 1001) AS n`
          .pipe(Effect.orDie)
        yield* seedTotals(walletId, [
          { day: "2026-06-10", spent_usd: "1" },
          { day: "2026-06-09", model: "a", spent_usd: "0.5" }
        ])
        const answer = yield* report(user.token, "day,model", "&from=2026-06-01&to=2026-07-01")
        expect(answer.body.groups).toHaveLength(1000)
        // Ties at 1 go by model, null last: m-1001 and no model are left out with the smallest, "a".
        expect(answer.body.groups[0]).toEqual(group(["2026-06-10", "m-0001"], "1.000000", 1))
        expect(answer.body.groups[999]).toEqual(group(["2026-06-10", "m-1000"], "1.000000", 1))
        expect(answer.body.total).toEqual({ spent_usd: "1002.500000", unfunded_usd: "0.000000", sessions: 1003 })
      }))

    it.effect("422 validation_failed at #/query/group_by: four dimensions, unknown, repeated, a bad label key, day with month", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const cases: ReadonlyArray<readonly [string, RegExp]> = [
          ["repository,user,model,day", /one to 3 dimensions, not 4/],
          ["team", /"team" is not a dimension/],
          ["repository,week", /"week" is not a dimension/],
          ["repository, user", /" user" is not a dimension/],
          ["repository,", /one to 3 of/],
          ["label", /"label" is not a dimension/],
          ["label:", /a label's key must be/],
          ["label:Team", /a label's key must be/],
          ["label:team's", /a label's key must be/],
          ["model,model", /names model twice/],
          ["label:team,day,label:team", /names label:team twice/],
          ["day,month", /day and month together/],
          ["month,repository,day", /day and month together/]
        ]
        for (const [groupBy, detail] of cases) {
          const answer = yield* report(user.token, groupBy)
          expect(answer.status, groupBy).toBe(422)
          expect(answer.body).toMatchObject(problem(422, "validation_failed"))
          expect(pointers(answer.reply), groupBy).toEqual(["#/query/group_by"])
          const errors = (answer.body as unknown as { errors: ReadonlyArray<{ detail: string }> }).errors
          expect(errors[0]?.detail, groupBy).toMatch(detail)
        }
      }))
  })

  describe("sessions, ledger entries and the export", () => {
    /**
     * A user's wallet with a budget, a labelled session that reserved and spent on a model, and
     * a session with neither; the sessions' rows as the batch writes them.
     */
    const books = Effect.gen(function*() {
      const user = yield* signedInUser()
      const account = new Account({ kind: "user", id: user.id })
      const ledgers = yield* WalletLedger
      // Keys whose order by length (PostgreSQL's for jsonb) is not their order by name.
      const labels = { zz: "y", a_long_key: "say \"hi\", ✓ =1" }
      const model = "=gpt-4o \"mini\", cheap"
      yield* ledgers.withLock(account, (ledger) =>
        ledger.moveAll([
          { kind: "budget_set", budget_usd: usd("100") },
          { kind: "reserve", amount_usd: usd("5"), session_id: "s-labelled", task_id: "t-1", labels },
          { kind: "spend", amount_usd: usd("2"), from_reserved_usd: usd("2"), session_id: "s-labelled", labels, model },
          { kind: "reserve", amount_usd: usd("1"), session_id: "s-plain" },
          { kind: "spend", amount_usd: usd("1"), from_reserved_usd: usd("1"), session_id: "s-plain" }
        ]))
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO settlement_sessions (wallet_id, session_id, task_id, held_usd, spent_usd, state, expires_at, labels)
        SELECT id, 's-labelled', 't-1', 3, 2, 'open', now() + interval '1 hour', ${JSON.stringify(labels)}::jsonb
        FROM wallets WHERE account_id = ${user.id}`.pipe(Effect.orDie)
      // Opened before the labelled one, so listed after it (newest first).
      yield* sql`
        INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, state, expires_at, created_at)
        SELECT id, 's-plain', 0, 1, 'released', now(), now() - interval '1 minute'
        FROM wallets WHERE account_id = ${user.id}`.pipe(Effect.orDie)
      return { ...user, account, model }
    })

    /** The labels as read: keys in order, whichever order they were stored in. */
    const shown = { a_long_key: "say \"hi\", ✓ =1", zz: "y" }

    it.effect("sessions carry their labels, {} when none, in the list and the detail", () =>
      Effect.gen(function*() {
        const { model, token } = yield* books
        const page = yield* call("GET", `${WALLET}/sessions?state=all`, { token })
        expect(page.status).toBe(200)
        const sessions = (bodyOf(page).sessions ?? []) as ReadonlyArray<Record<string, unknown>>
        expect(sessions.map((s) => [s.session_id, s.labels])).toEqual([["s-labelled", shown], ["s-plain", {}]])
        expect(Object.keys(sessions[0]?.labels ?? {})).toEqual(["a_long_key", "zz"])
        const detail = yield* call("GET", `${WALLET}/sessions/s-labelled`, { token })
        expect(detail.status).toBe(200)
        expect(bodyOf(detail)).toMatchObject({ session_id: "s-labelled", labels: shown, entries_truncated: false })
        expect(
          (bodyOf(detail).entries as ReadonlyArray<Record<string, unknown>>).map((e) => [e.kind, e.model, e.labels])
        )
          .toEqual([["reserve", null, shown], ["spend", model, shown]])
        const plain = yield* call("GET", `${WALLET}/sessions/s-plain`, { token })
        expect(bodyOf(plain)).toMatchObject({ labels: {} })
        expect((bodyOf(plain).entries as ReadonlyArray<Record<string, unknown>>).map((e) => [e.model, e.labels]))
          .toEqual([[null, {}], [null, {}]])
      }))

    it.effect("ledger entries carry model (null when none) and labels ({} when none); the page is what LedgerPage encodes", () =>
      Effect.gen(function*() {
        const { account, model, token } = yield* books
        const reply = yield* call("GET", `${WALLET}/ledger`, { token })
        expect(reply.status).toBe(200)
        const entries = (bodyOf(reply).entries ?? []) as ReadonlyArray<Record<string, unknown>>
        expect(entries.map((e) => [e.kind, e.session_id, e.model, e.labels])).toEqual([
          ["spend", "s-plain", null, {}],
          ["reserve", "s-plain", null, {}],
          ["spend", "s-labelled", model, shown],
          ["reserve", "s-labelled", null, shown],
          ["budget_set", null, null, {}]
        ])
        expect(Object.keys(entries[2]?.labels ?? {})).toEqual(["a_long_key", "zz"])
        // The fields in the schema's order, model and labels after the attribution, then grants (D21).
        expect(Object.keys(entries[0] ?? {}).slice(-6)).toEqual([
          "repository_id",
          "user_id",
          "model",
          "labels",
          "grants",
          "created_at"
        ])
        // PostgreSQL writes the page; the contract's schema reads it and writes the same bytes.
        const wallets = yield* Wallets
        const json = yield* wallets.ledgerJson(account, { before: Option.none(), limit: 100 })
        const decoded = yield* Schema.decodeUnknown(Schema.parseJson(LedgerPage))(json)
        expect(yield* Schema.encode(Schema.parseJson(LedgerPage))(decoded)).toBe(json)
      }))

    it.effect("the CSV appends model and labels (JSON text, {} when none) after repository_id and user_id, then grants", () =>
      Effect.gen(function*() {
        const { model, token } = yield* books
        const reply = yield* call("GET", `${WALLET}/ledger.csv`, { token })
        expect(reply.status).toBe(200)
        const [header, ...rows] = parse(String(reply.body)) as ReadonlyArray<ReadonlyArray<string>>
        expect(header).toEqual([...LEDGER_CSV_COLUMNS])
        expect(header?.slice(-5)).toEqual(["repository_id", "user_id", "model", "labels", "grants"])
        const at = (name: string) => (header ?? []).indexOf(name)
        expect(rows.map((row) => [row[at("kind")], row[at("model")], row[at("labels")]])).toEqual([
          ["budget_set", "", "{}"],
          ["reserve", "", JSON.stringify(shown)],
          // A model that begins like a formula is guarded as every cell is (D13); labels are JSON, never a formula.
          ["spend", `'${model}`, JSON.stringify(shown)],
          ["reserve", "", "{}"],
          ["spend", "", "{}"]
        ])
        expect(JSON.parse(rows[2]?.[at("labels")] ?? "")).toEqual(shown)
      }))

    it.effect("ledger verify replays the running totals per model and labels too, and names a total by them", () =>
      Effect.gen(function*() {
        const { account, id, model } = yield* books
        const sql = yield* SqlClient.SqlClient
        // The totals as the batch keeps them: per UTC day of the spend, its model and its session's labels.
        yield* sql`
          INSERT INTO settlement_spend_totals (wallet_id, day, model, labels, spent_usd, sessions)
          SELECT wallet_id, (created_at AT TIME ZONE 'UTC')::date, model, labels, amount_usd, 1
          FROM ledger_entries WHERE kind = 'spend' AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${id})`
          .pipe(Effect.orDie)
        const verify = Effect.flatMap(Books, (books) => books.verify(Option.some(account.id)))
        expect((yield* verify).mismatches).toEqual([])
        yield* sql`UPDATE settlement_spend_totals SET model = 'other'
                   WHERE model IS NOT NULL AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${id})`
          .pipe(Effect.orDie)
        const mismatches = (yield* verify).mismatches
        expect(mismatches.map((m) => [m.check, m.group?.model, m.group?.labels, m.expected === null, m.found === null]))
          .toEqual([
            ["spend_totals", model, shown, false, true],
            ["spend_totals", "other", shown, true, false]
          ])
      }))
  })
})
