import { isDeepStrictEqual } from "node:util"
import { createUsers, signIn } from "../lib/fixtures.js"
import { compareRounds, type Contender, figuresOf, httpRunner, type HttpRequestSpec, pairedRatio } from "../lib/load.js"
import type { Bench, Row, Suite, SuiteResult } from "../lib/suite.js"

/** An endpoint the service and the baseline (bench/baseline/routes.ts) both answer. */
interface Endpoint {
  /** Names its ratios: `http_<key>_rps_vs_baseline`, `http_<key>_p99_vs_baseline`. */
  readonly key: string
  readonly request: (token: string) => HttpRequestSpec
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Authenticated reads: the middleware (token, live-session query) plus the handler's own work. */
const endpoints: ReadonlyArray<Endpoint> = [
  { key: "me", request: (token) => ({ method: "GET", path: "/auth/me", headers: bearer(token) }) }
]

const CONNECTIONS = [1, 16, 64] as const
/** The targets (≥ 0.6× the baseline's req/s, p99 ≤ 2×) hold under concurrency; one connection shows latency alone. */
const HEADLINE_CONNECTIONS: ReadonlyArray<number> = [16, 64]
const WARM_UP_CONNECTIONS = 16

/** Both servers must give the same answer, or the comparison compares different work. */
const sameAnswer = async (contenders: ReadonlyArray<Contender>) => {
  const answers = await Promise.all(contenders.map(async ({ baseUrl, name, request }) => {
    const response = await fetch(baseUrl + request.path, {
      method: request.method,
      headers: { ...request.headers },
      ...(request.body === undefined ? {} : { body: request.body }),
      signal: AbortSignal.timeout(5_000)
    })
    return { name, status: response.status, body: await response.json() as unknown }
  }))
  const [first, ...others] = answers
  for (const other of others) {
    if (first === undefined || other.status !== 200 || !isDeepStrictEqual(other, { ...first, name: other.name })) {
      throw new Error(`the servers answer differently:\n${JSON.stringify(answers, null, 2)}`)
    }
  }
}

const measureEndpoint = async (bench: Bench, endpoint: Endpoint, token: string): Promise<SuiteResult> => {
  const { stack, settings, progress } = bench
  const request = endpoint.request(token)
  const label = `${request.method} ${request.path}`
  const api: Contender = { name: "api", baseUrl: stack.api.baseUrl, request, cpuSeconds: stack.api.cpuSeconds }
  const baseline: Contender = {
    name: "baseline",
    baseUrl: stack.baseline.baseUrl,
    request,
    cpuSeconds: stack.baseline.cpuSeconds
  }
  await sameAnswer([api, baseline])
  for (const contender of [api, baseline]) {
    progress(`http ${label}: warming up ${contender.name}`)
    await httpRunner(contender).round({ connections: WARM_UP_CONNECTIONS, durationSeconds: settings.warmUpSeconds })
  }

  const rows: Array<Row> = []
  const ratios: Record<string, number> = {}
  for (const connections of CONNECTIONS) {
    const rounds = await compareRounds([httpRunner(api), httpRunner(baseline)], {
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
    const ofBaseline = rounds.get(baseline.name) ?? []
    const vs = { reference: baseline.name, rps: pairedRatio(ofApi, ofBaseline, "rps"), p99: pairedRatio(ofApi, ofBaseline, "p99_ms") }
    rows.push({ suite: "http", request: label, server: api.name, connections, ...figuresOf(ofApi), vs, rounds: ofApi })
    rows.push({ suite: "http", request: label, server: baseline.name, connections, ...figuresOf(ofBaseline), rounds: ofBaseline })
    ratios[`http_${endpoint.key}_rps_vs_baseline_c${connections}`] = vs.rps.median
    ratios[`http_${endpoint.key}_p99_vs_baseline_c${connections}`] = vs.p99.median
  }
  // The headline is the worse of the concurrent cases: the lower req/s ratio, the higher p99 ratio.
  ratios[`http_${endpoint.key}_rps_vs_baseline`] = Math.min(
    ...HEADLINE_CONNECTIONS.map((c) => ratios[`http_${endpoint.key}_rps_vs_baseline_c${c}`] ?? Number.NaN)
  )
  ratios[`http_${endpoint.key}_p99_vs_baseline`] = Math.max(
    ...HEADLINE_CONNECTIONS.map((c) => ratios[`http_${endpoint.key}_p99_vs_baseline_c${c}`] ?? Number.NaN)
  )
  return { rows, ratios }
}

/** The service against the fastify + pg baseline, endpoint by endpoint, at 1, 16 and 64 connections. */
export const httpSuite: Suite = {
  name: "http",
  run: async (bench) => {
    const [user] = await createUsers(bench.stack.databaseUrl, 1)
    if (user === undefined) throw new Error("no bench user")
    const token = await signIn(bench.stack.api.baseUrl, user)
    const rows: Array<Row> = []
    const ratios: Record<string, number> = {}
    for (const endpoint of endpoints) {
      const result = await measureEndpoint(bench, endpoint, token)
      rows.push(...result.rows)
      Object.assign(ratios, result.ratios)
    }
    return { rows, ratios }
  }
}
