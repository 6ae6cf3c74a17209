import { randomUUID } from "node:crypto"
import { isDeepStrictEqual } from "node:util"
import { bearer, createUsers, expectStatus, send, signIn } from "../lib/fixtures.js"
import {
  compareRounds,
  type Contender,
  figuresOf,
  type HttpRequestSpec,
  httpRunner,
  pairedRatio,
  type Runner
} from "../lib/load.js"
import type { Bench, Row, Suite, SuiteResult } from "../lib/suite.js"
import { POLICY_PATH, policyWriteRunner } from "./policyWrites.js"

/**
 * The service's endpoints under load, at 1, 16 and 64 connections: the wallet
 * read beside the fastify + pg baseline (bench/baseline/routes.ts), the ledger
 * page and the policy write on their own.
 *
 * `GET /auth/me`, which the earlier profiling used, is no longer measured: the
 * whole run must stay under ten minutes, and the wallet read does the same
 * authentication plus one query of its own.
 */

const CONNECTIONS = [1, 16, 64] as const
/** The targets (≥ 0.6× the baseline's req/s, p99 ≤ 2×) hold under concurrency; one connection shows latency alone. */
const HEADLINE_CONNECTIONS: ReadonlyArray<number> = [16, 64]
const WARM_UP_CONNECTIONS = 16

const WALLET_PATH = "/developer/account/wallet"
const LEDGER_PAGE = 100
/** More than a page, so the measured page is full and says there is an older one. */
const LEDGER_ENTRIES = LEDGER_PAGE + 20

/** One group of rows: the service, and the baseline doing the same work when there is one. */
interface Measurement {
  /** Names its ratios: `http_<key>_rps_vs_baseline`, `http_<key>_p99_vs_baseline`. */
  readonly key: string
  /** The request column of its rows. */
  readonly label: string
  readonly api: Runner
  readonly baseline?: Runner
}

/** Both servers must give the same answer, or the comparison compares different work. */
const sameAnswer = async (contenders: ReadonlyArray<Contender>) => {
  const answers = await Promise.all(contenders.map(async ({ baseUrl, name, request }) => ({
    name,
    ...(await send(baseUrl, request))
  })))
  const [first, ...others] = answers
  for (const other of others) {
    if (first === undefined || other.status !== 200 || !isDeepStrictEqual(other, { ...first, name: other.name })) {
      throw new Error(`the servers answer differently:\n${JSON.stringify(answers, null, 2)}`)
    }
  }
}

const measure = async (bench: Bench, measurement: Measurement): Promise<SuiteResult> => {
  const { progress, settings } = bench
  const { api, baseline, key, label } = measurement
  const runners = baseline === undefined ? [api] : [api, baseline]
  for (const runner of runners) {
    progress(`http ${label}: warming up ${runner.name}`)
    await runner.round({ connections: WARM_UP_CONNECTIONS, durationSeconds: settings.warmUpSeconds })
  }

  const rows: Array<Row> = []
  const ratios: Record<string, number> = {}
  for (const connections of CONNECTIONS) {
    const rounds = await compareRounds(runners, {
      connections,
      durationSeconds: settings.durationSeconds,
      rounds: settings.rounds,
      onRound: (name, round, figures) =>
        progress(
          `http ${label} ×${connections} round ${round} ${name}: ${figures.rps.toFixed(0)} req/s, ` +
            `p99 ${figures.p99_ms.toFixed(1)} ms, ${figures.cpu_us_per_request?.toFixed(0) ?? "?"} CPU µs/req`
        )
    })
    const ofApi = rounds.get(api.name) ?? []
    const common = { suite: "http", request: label, connections }
    if (baseline === undefined) {
      rows.push({ ...common, server: api.name, ...figuresOf(ofApi), rounds: ofApi })
      continue
    }
    const ofBaseline = rounds.get(baseline.name) ?? []
    const vs = {
      reference: baseline.name,
      rps: pairedRatio(ofApi, ofBaseline, "rps"),
      p99: pairedRatio(ofApi, ofBaseline, "p99_ms")
    }
    rows.push({ ...common, server: api.name, ...figuresOf(ofApi), vs, rounds: ofApi })
    rows.push({ ...common, server: baseline.name, ...figuresOf(ofBaseline), rounds: ofBaseline })
    ratios[`http_${key}_rps_vs_baseline_c${connections}`] = vs.rps.median
    ratios[`http_${key}_p99_vs_baseline_c${connections}`] = vs.p99.median
  }
  if (baseline !== undefined) {
    // The headline is the worse of the concurrent cases: the lower req/s ratio, the higher p99 ratio.
    ratios[`http_${key}_rps_vs_baseline`] = Math.min(
      ...HEADLINE_CONNECTIONS.map((c) => ratios[`http_${key}_rps_vs_baseline_c${c}`] ?? Number.NaN)
    )
    ratios[`http_${key}_p99_vs_baseline`] = Math.max(
      ...HEADLINE_CONNECTIONS.map((c) => ratios[`http_${key}_p99_vs_baseline_c${c}`] ?? Number.NaN)
    )
  }
  return { rows, ratios }
}

/** The wallet read, the service beside the baseline: authentication plus one query and its JSON. */
const walletRead = async (bench: Bench, token: string): Promise<Measurement> => {
  const { stack } = bench
  const request: HttpRequestSpec = { method: "GET", path: WALLET_PATH, headers: bearer(token) }
  const api: Contender = { name: "api", baseUrl: stack.api.baseUrl, request, cpuSeconds: stack.api.cpuSeconds }
  const baseline: Contender = {
    name: "baseline",
    baseUrl: stack.baseline.baseUrl,
    request,
    cpuSeconds: stack.baseline.cpuSeconds
  }
  await sameAnswer([api, baseline])
  return { key: "wallet", label: `GET ${WALLET_PATH}`, api: httpRunner(api), baseline: httpRunner(baseline) }
}

/**
 * Budget decisions through the API, each with its own idempotency key and the
 * version the previous one produced: `count` budget_set entries, and a budget
 * with decimals for the wallet read to format.
 */
const setBudgets = async (baseUrl: string, token: string, count: number) => {
  for (let version = 0; version < count; version++) {
    const answer = await send(baseUrl, {
      method: "PUT",
      path: WALLET_PATH,
      headers: { ...bearer(token), "content-type": "application/json" },
      body: JSON.stringify({
        budget_usd: `${1000 + version}.125`,
        idempotency_key: randomUUID(),
        expected_version: version
      })
    })
    expectStatus(answer, 200, `PUT ${WALLET_PATH} at version ${version}`)
  }
}

/** A full page of the ledger, newest first, from a wallet with more entries than the page. */
const ledgerPage = async (bench: Bench, token: string): Promise<Measurement> => {
  const { stack } = bench
  const request: HttpRequestSpec = {
    method: "GET",
    path: `${WALLET_PATH}/ledger?limit=${LEDGER_PAGE}`,
    headers: bearer(token)
  }
  const page = expectStatus(await send(stack.api.baseUrl, request), 200, `GET ${request.path}`)
  if (!Array.isArray(page.entries) || page.entries.length !== LEDGER_PAGE || page.next_before === null) {
    throw new Error(`GET ${request.path}: expected a full page with older entries, got ${JSON.stringify(page)}`)
  }
  const api: Contender = { name: "api", baseUrl: stack.api.baseUrl, request, cpuSeconds: stack.api.cpuSeconds }
  return { key: "ledger", label: `GET ${request.path}`, api: httpRunner(api) }
}

/** Policy writes, an account per connection (./policyWrites.ts). */
const policyWrites = (bench: Bench, tokens: ReadonlyArray<string>): Measurement => ({
  key: "policy",
  label: `PUT ${POLICY_PATH} (an account per connection)`,
  api: policyWriteRunner(bench.stack.api.baseUrl, tokens, bench.stack.api.cpuSeconds)
})

/** The wallet read against the baseline, then the ledger page and the policy write, at 1, 16 and 64 connections. */
export const httpSuite: Suite = {
  name: "http",
  // At three concurrencies: the wallet read's two contenders, the ledger page and the policy write;
  // a warm-up per contender.
  plannedSeconds: (settings) => 12 * settings.rounds * settings.durationSeconds + 4 * settings.warmUpSeconds + 20,
  run: async (bench) => {
    const { progress, stack } = bench
    const writers = Math.max(...CONNECTIONS)
    progress(`http: creating ${1 + writers} users, ${LEDGER_ENTRIES} budget decisions`)
    const [reader, ...others] = await createUsers(stack.databaseUrl, 1 + writers)
    if (reader === undefined) throw new Error("no bench user")
    const token = await signIn(stack.api.baseUrl, reader)
    const writerTokens = await Promise.all(others.map((user) => signIn(stack.api.baseUrl, user)))
    await setBudgets(stack.api.baseUrl, token, LEDGER_ENTRIES)

    const measurements = [
      await walletRead(bench, token),
      await ledgerPage(bench, token),
      policyWrites(bench, writerTokens)
    ]
    const rows: Array<Row> = []
    const ratios: Record<string, number> = {}
    for (const measurement of measurements) {
      const result = await measure(bench, measurement)
      rows.push(...result.rows)
      Object.assign(ratios, result.ratios)
      bench.soFar({ rows: [...rows], ratios: { ...ratios } })
    }
    // The ledger page against the wallet read (the same token check, one statement instead of one
    // page of rows), at 64 connections: medians of each one's rounds, measured one after the other.
    const at64 = (key: "wallet" | "ledger") =>
      rows.find((row) =>
        row.server === "api" && row.connections === 64 &&
        row.request === measurements.find((m) => m.key === key)?.label
      )
    const [wallet, ledger] = [at64("wallet"), at64("ledger")]
    if (wallet?.cpu_us_per_request !== undefined && ledger?.cpu_us_per_request !== undefined) {
      ratios.ledger_page_cpu_vs_wallet_read = ledger.cpu_us_per_request.median / wallet.cpu_us_per_request.median
    }
    if (wallet !== undefined && ledger !== undefined) {
      ratios.ledger_page_p99_vs_wallet_read_c64 = ledger.p99_ms.median / wallet.p99_ms.median
    }
    return { rows, ratios }
  }
}
