import { randomUUID } from "node:crypto"
import type pg from "pg"
import * as Money from "../../src/Domain/Money.js"
import { readRssMb } from "../lib/child.js"
import { bearer, createUsers, expectStatus, send, signIn } from "../lib/fixtures.js"
import {
  compareRounds,
  type Contender,
  figuresOf,
  type HttpRequestSpec,
  httpRunner,
  pairedRatio,
  pairedRatioOf,
  stackCpuUsPerRequest,
  withPostgresCpu
} from "../lib/load.js"
import { endQuietly, openClient } from "../lib/pg.js"
import type { Suite } from "../lib/suite.js"

/**
 * D7: a ledger page costs the same at any depth (keyset paging on
 * (wallet_id, sequence), no OFFSET). One wallet holds more than a million
 * entries; the newest page and the page a million entries further back are
 * asked for side by side, round by round, through the API.
 *
 * D16: beside them, the spend report of the same wallet, read from the running totals a year of
 * its sessions left, costs about as much as the newest page (target ≤ 1.5× its CPU), however long
 * the ledger behind it.
 *
 * D19: and the wallet's balances as of a time a million entries back, one probe of the ledger's
 * time index, cost about as much as the newest page (target ≤ 1.2× the API's and PostgreSQL's
 * CPU per request).
 */

const DEPTH = 1_000_000
const PAGE = 100
const CONNECTIONS = 16
const LEDGER_PATH = "/developer/account/wallet/ledger"
const BUDGET = "100000"
/** Each loaded session reserves, spends part of the hold and releases the rest: three entries. */
const RESERVE = Money.decimal("0.05")
const SPEND = Money.decimal("0.03")
/** Enough sessions for the deep page to be full and still have older entries behind it. */
const SESSIONS = Math.ceil((DEPTH + 2 * PAGE) / 3)

/**
 * The sessions' entries, appended after the wallet's newest entry in one
 * statement, under the wallet's row lock as the service takes sequences.
 * Entry n of the series is movement n % 3 of session n / 3: a reserve of
 * RESERVE, a spend of SPEND out of that hold, the release of the rest. Every
 * row holds what the table's checks and D7 ask: consecutive sequences, the
 * balances after the movement, available = budget − reserved − spent, a session
 * on every session movement; replaying them from the wallet's balances gives
 * the next. Each is stamped a microsecond after the one before, from the
 * wallet's newest entry on, so the ledger has a time to read balances at at any
 * depth (D19). The settlement worker's own records of these sessions are not
 * written: only the ledger is read here.
 */
const APPEND_SESSIONS = `
  WITH wallet AS (
    SELECT id, budget_usd, reserved_usd, spent_usd, last_sequence,
      (SELECT created_at FROM ledger_entries e WHERE e.wallet_id = wallets.id AND e.sequence = wallets.last_sequence)
        AS last_at
    FROM wallets WHERE id = $1 FOR UPDATE
  ), movement AS (
    SELECT n,
      (ARRAY['reserve', 'spend', 'reserve_release']::ledger_entry_kind[])[n % 3 + 1] AS kind,
      (ARRAY[$3::numeric, $4::numeric, $3::numeric - $4::numeric])[n % 3 + 1] AS amount,
      (ARRAY[$3::numeric, $3::numeric - $4::numeric, 0])[n % 3 + 1] AS held,
      $4::numeric * (n / 3 + CASE n % 3 WHEN 0 THEN 0 ELSE 1 END) AS spent
    FROM generate_series(0, $2::bigint - 1) AS n
  )
  INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
    spent_after_usd, available_after_usd, session_id, created_at)
  SELECT w.id, w.last_sequence + 1 + m.n, m.kind, m.amount, w.budget_usd, w.reserved_usd + m.held,
    w.spent_usd + m.spent, w.budget_usd - (w.reserved_usd + m.held) - (w.spent_usd + m.spent),
    'ledger-depth-' || (m.n / 3), w.last_at + (m.n + 1) * interval '1 microsecond'
  FROM wallet w CROSS JOIN movement m`

/** The wallet as the service leaves it after a movement: the newest entry's balances and sequence. */
const CATCH_UP_WALLET = `
  UPDATE wallets w SET budget_usd = e.budget_after_usd, reserved_usd = e.reserved_after_usd,
    spent_usd = e.spent_after_usd, last_sequence = e.sequence, updated_at = e.created_at
  FROM (SELECT sequence, budget_after_usd, reserved_after_usd, spent_after_usd, created_at FROM ledger_entries
        WHERE wallet_id = $1 ORDER BY sequence DESC LIMIT 1) e
  WHERE w.id = $1`

/** The balances as of a time (D19). */
const AS_OF_PATH = "/developer/account/wallet/as-of"

/** An entry's time as the ledger shows it: UTC, to the millisecond. */
const ENTRY_TIME = `
  SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS time
  FROM ledger_entries WHERE wallet_id = $1 AND sequence = $2`

/** The entry whose balances the wallet had at a time, by D19's rule, read here to check the API's answer. */
const ENTRY_AS_OF = `
  SELECT id, sequence::integer AS sequence FROM ledger_entries
  WHERE wallet_id = $1 AND created_at < $2::timestamptz + interval '1 millisecond'
  ORDER BY created_at DESC, sequence DESC LIMIT 1`

/** The spend report as an administrator reads it most: this month, by repository (D16). */
const SPEND_PATH = "/developer/account/spend?group_by=repository"
/** A year of days, a few repositories and users: what a million entries of an active account leave as totals. */
const TOTAL_DAYS = 365
const REPOSITORIES = 5
const USERS = 4

/**
 * The running totals the settlement transaction would have written for the loaded sessions (D16):
 * one row per UTC day of the last year, repository and user, the sessions spread evenly over
 * them, each spending SPEND, so the totals sum to the ledger's spends and sessions.
 */
const SEED_TOTALS = `
  WITH attribution AS (
    SELECT d, r, u, row_number() OVER (ORDER BY d, r, u) - 1 AS place, count(*) OVER () AS cells
    FROM generate_series(0, $2::int - 1) AS d, generate_series(1, $3::int) AS r, generate_series(1, $4::int) AS u
  ), cell AS (
    SELECT d, r, u, $5::bigint / cells + CASE WHEN place < $5::bigint % cells THEN 1 ELSE 0 END AS sessions
    FROM attribution
  )
  INSERT INTO settlement_spend_totals (wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions)
  SELECT $1, (now() AT TIME ZONE 'UTC')::date - d,
    ('00000000-0000-4000-8000-' || lpad(r::text, 12, '0'))::uuid,
    ('00000000-0000-4000-9000-' || lpad(u::text, 12, '0'))::uuid,
    sessions * $6::numeric, 0, sessions
  FROM cell WHERE sessions > 0`

/** Loads the sessions into the wallet in one transaction; the ledger then holds `1 + 3 × SESSIONS` entries. */
const loadSessions = async (client: pg.Client, walletId: string) => {
  await client.query("BEGIN")
  try {
    await client.query(APPEND_SESSIONS, [walletId, 3 * SESSIONS, RESERVE.toFixed(6), SPEND.toFixed(6)])
    await client.query(CATCH_UP_WALLET, [walletId])
    await client.query(SEED_TOTALS, [walletId, TOTAL_DAYS, REPOSITORIES, USERS, SESSIONS, SPEND.toFixed(6)])
    await client.query("COMMIT")
  } catch (error) {
    await client.query("ROLLBACK")
    throw error
  }
}

/** Sequences 1…n with no gap, and the wallet's last_sequence at n. */
const checkSequences = async (client: pg.Client, walletId: string): Promise<number> => {
  const { rows } = await client.query<
    { readonly entries: string; readonly first: string; readonly last: string; readonly last_sequence: string }
  >(
    `SELECT count(*)::text AS entries, min(e.sequence)::text AS first, max(e.sequence)::text AS last,
            (SELECT last_sequence::text FROM wallets WHERE id = $1) AS last_sequence
     FROM ledger_entries e WHERE e.wallet_id = $1`,
    [walletId]
  )
  const row = rows[0]
  if (row === undefined || row.first !== "1" || row.entries !== row.last || row.last !== row.last_sequence) {
    throw new Error(`ledger of wallet ${walletId} after the load: ${JSON.stringify(row)}`)
  }
  return Number(row.last)
}

const sequenceOf = (entry: unknown): unknown =>
  typeof entry === "object" && entry !== null && "sequence" in entry ? entry.sequence : undefined

const sequencesOf = (page: Readonly<Record<string, unknown>>): ReadonlyArray<unknown> =>
  Array.isArray(page.entries) ? page.entries.map(sequenceOf) : []

/** A full page starting at `first` (newest first, no gap) with older entries behind it. */
const checkPage = async (baseUrl: string, request: HttpRequestSpec, first: number) => {
  const page = expectStatus(await send(baseUrl, request), 200, `GET ${request.path}`)
  const sequences = sequencesOf(page)
  const expected = Array.from({ length: PAGE }, (_, index) => first - index)
  if (JSON.stringify(sequences) !== JSON.stringify(expected) || typeof page.next_before !== "string") {
    throw new Error(
      `GET ${request.path}: expected sequences ${first}…${first - PAGE + 1} and a next page, got ${
        JSON.stringify(sequences)
      }`
    )
  }
}

const seconds = (since: number) => (performance.now() - since) / 1000

/** This month's report: every repository, each with this month's days' share of the sessions. */
const checkSpendReport = async (baseUrl: string, request: HttpRequestSpec) => {
  const report = expectStatus(await send(baseUrl, request), 200, `GET ${request.path}`)
  const groups = Array.isArray(report.groups) ? report.groups : []
  const total = typeof report.total === "object" && report.total !== null && "sessions" in report.total
    ? Number(report.total.sessions)
    : 0
  if (groups.length !== REPOSITORIES || !(total > 0)) {
    throw new Error(
      `GET ${request.path}: expected ${REPOSITORIES} repositories and sessions, got ${JSON.stringify(report)}`
    )
  }
}

/**
 * D13: the whole wallet as CSV, read as a client saving it would, counting its lines as they
 * arrive (the bench holds no more of it than a chunk). The API's resident set is sampled
 * throughout: a streamed export keeps it flat whatever the ledger's size.
 */
const exportLedger = async (baseUrl: string, token: string, pid: number) => {
  const before = readRssMb(pid) ?? 0
  let peak = before
  const sampler = setInterval(() => {
    peak = Math.max(peak, readRssMb(pid) ?? 0)
  }, 50)
  const started = performance.now()
  try {
    const response = await fetch(`${baseUrl}/developer/account/wallet/ledger.csv`, { headers: bearer(token) })
    if (response.status !== 200 || response.body === null) throw new Error(`GET ledger.csv answered ${response.status}`)
    let lines = 0
    let bytes = 0
    for await (const chunk of response.body) {
      bytes += chunk.byteLength
      for (const byte of chunk) if (byte === 0x0a) lines++
    }
    return { entries: lines - 1, bytes, seconds: seconds(started), rssBeforeMb: before, rssPeakMb: peak }
  } finally {
    clearInterval(sampler)
  }
}

/**
 * The newest ledger page against the page a million entries deep, at 16
 * connections. `ledger_depth_page_ratio` is the deep page's cost over the
 * newest page's, as the inverse of req/s (the server is saturated at 16
 * connections, so req/s is pages per second of the whole stack): the median
 * of the round-by-round ratios. D7 holds while it stays near 1 (target ≤ 1.2).
 * The deep request also looks its `before` entry up by id, one indexed
 * statement the newest page does not need. `wallet_as_of_cpu_vs_ledger_page`
 * is the balances as of a time a million entries back over the newest page, by
 * the API's and PostgreSQL's CPU per request together (the probe's work is the
 * database's), round by round (D19: target ≤ 1.2).
 */
export const ledgerSuite: Suite = {
  name: "ledger",
  // Four contenders' rounds and their warm-ups, after loading a million entries; then the export.
  plannedSeconds: (settings) => 4 * settings.rounds * settings.durationSeconds + 4 * settings.warmUpSeconds + 90,
  run: async ({ progress, settings, stack }) => {
    const [user] = await createUsers(stack.databaseUrl, 1)
    if (user === undefined) throw new Error("no bench user")
    const token = await signIn(stack.api.baseUrl, user)
    // The wallet and its first entry come from the API, as any wallet's do.
    const wallet = expectStatus(
      await send(stack.api.baseUrl, {
        method: "PUT",
        path: "/developer/account/wallet",
        headers: { ...bearer(token), "content-type": "application/json" },
        body: JSON.stringify({ budget_usd: BUDGET, idempotency_key: randomUUID() })
      }),
      200,
      "PUT /developer/account/wallet"
    )
    if (typeof wallet.id !== "string") throw new Error("the wallet has no id")
    const walletId = wallet.id

    const client = await openClient({ connectionString: stack.databaseUrl, application_name: "bench ledger" })
    let newest: number
    let before: string
    let loadSeconds: number
    let asOf: { readonly time: string; readonly id: string; readonly sequence: number }
    try {
      progress(`ledger: loading ${(3 * SESSIONS).toLocaleString("en-US")} entries into one wallet`)
      const loading = performance.now()
      await loadSessions(client, walletId)
      loadSeconds = seconds(loading)
      const vacuuming = performance.now()
      // VACUUM rather than ANALYZE alone: it sets the pages' hint bits and keeps autovacuum from
      // starting on the million new rows in the middle of the rounds; it analyzes as well.
      await client.query("VACUUM (ANALYZE) ledger_entries")
      await client.query("VACUUM (ANALYZE) settlement_spend_totals")
      progress(
        `ledger: loaded in ${loadSeconds.toFixed(1)} s, vacuumed and analyzed in ${seconds(vacuuming).toFixed(1)} s`
      )
      newest = await checkSequences(client, walletId)
      // The deep page starts DEPTH entries back from the newest: `before` is the entry just newer than its first.
      const { rows } = await client.query<{ readonly id: string }>(
        "SELECT id FROM ledger_entries WHERE wallet_id = $1 AND sequence = $2",
        [walletId, newest - DEPTH + 1]
      )
      const found = rows[0]?.id
      if (found === undefined) throw new Error(`no entry ${newest - DEPTH + 1} in wallet ${walletId}`)
      before = found
      // The balances as of the time of the entry DEPTH back: the last entry of that millisecond's.
      const time = (await client.query<{ readonly time: string }>(ENTRY_TIME, [walletId, newest - DEPTH])).rows[0]?.time
      if (time === undefined) throw new Error(`no entry ${newest - DEPTH} in wallet ${walletId}`)
      const entry = (await client.query<{ readonly id: string; readonly sequence: number }>(ENTRY_AS_OF, [
        walletId,
        time
      ])).rows[0]
      if (entry === undefined) throw new Error(`no entry of wallet ${walletId} at or before ${time}`)
      asOf = { time, ...entry }
    } finally {
      await endQuietly(client)
    }

    // The service answers the loaded wallet as any other: the balances of its newest entry.
    const read = expectStatus(
      await send(stack.api.baseUrl, { method: "GET", path: "/developer/account/wallet", headers: bearer(token) }),
      200,
      "GET /developer/account/wallet"
    )
    const spent = Money.format(SPEND.times(SESSIONS))
    if (read.reserved_usd !== Money.format(Money.zero) || read.spent_usd !== spent) {
      throw new Error(`the loaded wallet reads ${JSON.stringify(read)}; expected nothing reserved and ${spent} spent`)
    }

    const newestPage: HttpRequestSpec = { method: "GET", path: `${LEDGER_PATH}?limit=${PAGE}`, headers: bearer(token) }
    const spendReport: HttpRequestSpec = { method: "GET", path: SPEND_PATH, headers: bearer(token) }
    await checkSpendReport(stack.api.baseUrl, spendReport)
    const deepPage: HttpRequestSpec = { ...newestPage, path: `${LEDGER_PATH}?limit=${PAGE}&before=${before}` }
    await checkPage(stack.api.baseUrl, newestPage, newest)
    await checkPage(stack.api.baseUrl, deepPage, newest - DEPTH)
    const asOfRequest: HttpRequestSpec = { ...newestPage, path: `${AS_OF_PATH}?time=${asOf.time}` }
    const balances = expectStatus(await send(stack.api.baseUrl, asOfRequest), 200, `GET ${asOfRequest.path}`)
    if (balances.entry_id !== asOf.id || balances.sequence !== asOf.sequence || balances.reserved_usd === undefined) {
      throw new Error(`GET ${asOfRequest.path}: expected entry ${asOf.sequence}, got ${JSON.stringify(balances)}`)
    }
    const asOfDepth = newest - asOf.sequence

    const contender = (name: string, request: HttpRequestSpec): Contender => ({
      name,
      baseUrl: stack.api.baseUrl,
      request,
      cpuSeconds: stack.api.cpuSeconds
    })
    const deepName = `page ${DEPTH.toLocaleString("en-US")} entries deep`
    const shallow = withPostgresCpu(httpRunner(contender("newest page", newestPage)))
    const deep = withPostgresCpu(httpRunner(contender(deepName, deepPage)))
    const spend = withPostgresCpu(httpRunner(contender("spend report", spendReport)))
    const balancesThen = withPostgresCpu(httpRunner(contender("balances as of a deep time", asOfRequest)))
    for (const runner of [shallow, deep, spend, balancesThen]) {
      progress(`ledger: warming up the ${runner.name}`)
      await runner.round({ connections: CONNECTIONS, durationSeconds: settings.warmUpSeconds })
    }
    const rounds = await compareRounds([shallow, deep, spend, balancesThen], {
      connections: CONNECTIONS,
      durationSeconds: settings.durationSeconds,
      rounds: settings.rounds,
      onRound: (name, round, figures) =>
        progress(
          `ledger round ${round} ${name}: ${figures.rps.toFixed(0)} pages/s, p50 ${figures.p50_ms.toFixed(1)} ms, ` +
            `p99 ${figures.p99_ms.toFixed(1)} ms, ${figures.cpu_us_per_request?.toFixed(0) ?? "?"} CPU µs/page, ` +
            `${figures.postgres_cpu_us_per_request?.toFixed(0) ?? "?"} postgres CPU µs/page`
        )
    })
    progress(`ledger: exporting all ${newest.toLocaleString("en-US")} entries as CSV`)
    const exported = await exportLedger(stack.api.baseUrl, token, stack.api.pid)
    if (exported.entries !== newest) throw new Error(`the export held ${exported.entries} entries, not ${newest}`)
    const exportRate = exported.entries / exported.seconds
    progress(
      `ledger: exported ${exported.entries.toLocaleString("en-US")} entries (${
        (exported.bytes / 1e6).toFixed(0)
      } MB) ` +
        `in ${exported.seconds.toFixed(1)} s, ${exportRate.toFixed(0)} entries/s; API RSS ` +
        `${exported.rssBeforeMb.toFixed(0)} MB before, ${exported.rssPeakMb.toFixed(0)} MB at most during`
    )
    const exportRound = {
      rps: exportRate,
      p50_ms: exported.seconds * 1000,
      p99_ms: exported.seconds * 1000,
      requests: exported.entries
    }

    const ofShallow = rounds.get(shallow.name) ?? []
    const ofDeep = rounds.get(deep.name) ?? []
    const ofSpend = rounds.get(spend.name) ?? []
    const ofAsOf = rounds.get(balancesThen.name) ?? []
    const vs = {
      reference: shallow.name,
      rps: pairedRatio(ofDeep, ofShallow, "rps"),
      p99: pairedRatio(ofDeep, ofShallow, "p99_ms")
    }
    const parameters = { entries: newest, load_seconds: loadSeconds }
    const common = { suite: "ledger", server: "api", connections: CONNECTIONS }
    return {
      rows: [
        {
          ...common,
          request: `GET ${newestPage.path} (newest page)`,
          ...figuresOf(ofShallow),
          parameters: { ...parameters, depth: 0 },
          rounds: ofShallow
        },
        {
          ...common,
          request: `GET ${LEDGER_PATH}?limit=${PAGE}&before=… (${DEPTH.toLocaleString("en-US")} entries deep)`,
          ...figuresOf(ofDeep),
          vs,
          parameters: { ...parameters, depth: DEPTH },
          rounds: ofDeep
        },
        {
          ...common,
          request: `GET ${SPEND_PATH} (this month, ${TOTAL_DAYS * REPOSITORIES * USERS} daily totals beside ${
            newest.toLocaleString("en-US")
          } entries)`,
          ...figuresOf(ofSpend),
          vs: {
            reference: shallow.name,
            rps: pairedRatio(ofSpend, ofShallow, "rps"),
            p99: pairedRatio(ofSpend, ofShallow, "p99_ms")
          },
          parameters: { entries: newest, days: TOTAL_DAYS, repositories: REPOSITORIES, users: USERS },
          rounds: ofSpend
        },
        {
          ...common,
          request: `GET ${AS_OF_PATH}?time=… (${asOfDepth.toLocaleString("en-US")} entries deep)`,
          ...figuresOf(ofAsOf),
          vs: {
            reference: shallow.name,
            rps: pairedRatio(ofAsOf, ofShallow, "rps"),
            p99: pairedRatio(ofAsOf, ofShallow, "p99_ms")
          },
          parameters: { entries: newest, depth: asOfDepth },
          rounds: ofAsOf
        },
        {
          ...common,
          connections: 1,
          request: `GET /developer/account/wallet/ledger.csv (${
            newest.toLocaleString("en-US")
          } entries; rps = entries/s)`,
          ...figuresOf([exportRound]),
          parameters: {
            entries: exported.entries,
            bytes: exported.bytes,
            api_rss_mb_before: Math.round(exported.rssBeforeMb),
            api_rss_mb_peak_during: Math.round(exported.rssPeakMb)
          },
          rounds: [exportRound]
        }
      ],
      // Cost per page is the inverse of req/s: the newest page's req/s over the deep page's, round by round.
      ratios: {
        ledger_depth_page_ratio: pairedRatio(ofShallow, ofDeep, "rps").median,
        // D16: the report is running totals, so it costs about a page whatever the ledger's size (target ≤ 1.5).
        spend_report_cpu_vs_ledger_page: pairedRatio(ofSpend, ofShallow, "cpu_us_per_request").median,
        // D19: one index probe, so the balances at a time a million entries back cost about a page (target ≤ 1.2).
        wallet_as_of_cpu_vs_ledger_page:
          pairedRatioOf(ofAsOf, ofShallow, "API + PostgreSQL CPU per request", stackCpuUsPerRequest).median,
        export_entries_per_second: Math.round(exportRate),
        export_api_rss_mb_growth: Math.round(exported.rssPeakMb - exported.rssBeforeMb)
      }
    }
  }
}
