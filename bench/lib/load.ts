import autocannon from "autocannon"
import { readPostgresCpuSeconds } from "./child.js"
import { percentile, type Stat, summarise } from "./stats.js"

export interface HttpRequestSpec {
  readonly method: "GET" | "POST" | "PUT"
  /** Path and query, e.g. `/auth/me`. */
  readonly path: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
}

/** A request of one connection's, and whether the round measures its answer. */
export interface ConnectionRequest {
  readonly request: HttpRequestSpec
  /** False for a request that only finds the connection's place again (a read after a lost answer): not counted. */
  readonly measured: boolean
}

/**
 * One connection's requests, for endpoints a fixed request cannot drive (a
 * write that must carry the version its previous write produced).
 */
export interface ConnectionRequests {
  /**
   * The request the connection sends next; asked once before the first and once after every
   * answer. `previousUnanswered` when the request before got no answer: autocannon re-opened the
   * connection (a timeout, a reset, a hang-up) and sends again, so what that request did is unknown.
   */
  readonly next: (previousUnanswered: boolean) => ConnectionRequest
  /** Every answer's status and body, told before `next` is asked for the following request. */
  readonly answered: (status: number, body: string) => void
}

/** A server under load: its name in the table, where it listens, what it is asked. */
export interface Contender {
  readonly name: string
  readonly baseUrl: string
  /** What every connection sends, unless `perConnection` says otherwise; errors name it. */
  readonly request: HttpRequestSpec
  /** Requests built per connection (numbered from 0 in each round) instead of `request`. */
  readonly perConnection?: (connection: number) => ConnectionRequests
  /** The server's CPU time so far, when it can be read: CPU per request holds up on a busy machine. */
  readonly cpuSeconds?: () => number | undefined
}

/** One round against one server. Latencies in milliseconds. */
export interface RoundFigures {
  readonly rps: number
  readonly p50_ms: number
  readonly p99_ms: number
  readonly requests: number
  /** The server's CPU time per answered request, in microseconds, when it could be measured. */
  readonly cpu_us_per_request?: number
  /** The webhooks process's CPU time per delivery it made in the round, in microseconds, where there were any. */
  readonly webhooks_cpu_us_per_delivery?: number
  /** The PostgreSQL server's CPU time (every process of it) per answered request, where it could be read. */
  readonly postgres_cpu_us_per_request?: number
  /** Planning's share of PostgreSQL's statement time in the round (`pg_stat_statements`), where it could be read. */
  readonly planning_share?: number
  /** Heap rows written per job (inserted or updated), from the WAL the round wrote. */
  readonly rows_written_per_job?: number
  /** B-tree entries written per job, from the same WAL. */
  readonly index_entries_per_job?: number
  /** Wallets a worker read and decided again, per job (two workers racing for a wallet). */
  readonly wallet_rereads_per_job?: number
}

/** The optional figures of a round that a row summarises when every round has them. */
const OPTIONAL_FIGURES = [
  "cpu_us_per_request",
  "webhooks_cpu_us_per_delivery",
  "postgres_cpu_us_per_request",
  "planning_share",
  "rows_written_per_job",
  "index_entries_per_job",
  "wallet_rereads_per_job"
] as const

export interface RoundOptions {
  readonly connections: number
  readonly durationSeconds: number
  /**
   * autocannon re-opens each connection after this many answers, dropping that answer unread (its
   * `reconnectRate`), as it does after a timeout or a reset: how a round copes with lost answers.
   */
  readonly reconnectEvery?: number
}

/** autocannon's form of a request; the headers are a fresh object because it adds `Content-Length` to them. */
const toAutocannon = (request: HttpRequestSpec): autocannon.Request => ({
  method: request.method,
  path: request.path,
  headers: { ...request.headers },
  ...(request.body === undefined ? {} : { body: request.body })
})

const isSuccess = (status: number) => status >= 200 && status < 300

/**
 * Closed-loop load: every connection sends its next request when the last one
 * is answered (keep-alive, no pipelining). Only measured 2xx answers are counted, and
 * any other outcome (another status, a connection error, a timeout, a request
 * autocannon skipped) fails the round: figures of errors measure nothing, and
 * fast failures would inflate req/s.
 */
export const runRound = async (contender: Contender, options: RoundOptions): Promise<RoundFigures> => {
  const { perConnection, request } = contender
  // autocannon's own histogram keeps whole milliseconds; a fast endpoint needs finer.
  const latencies: Array<number> = []
  let connections = 0
  /** Whether each connection's request in flight is measured; answers that are not do not count. */
  const measuring = new Map<autocannon.Client, { measured: boolean }>()
  let unmeasuredSuccesses = 0
  const cpuBefore = contender.cpuSeconds?.()
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      url: contender.baseUrl + request.path,
      ...toAutocannon(request),
      ...(perConnection === undefined ? {} : {
        // Called once per connection before it sends anything; its state lives in the closure,
        // because autocannon resets a request's `context` every time its list of requests wraps.
        setupClient: (client: autocannon.Client) => {
          const own = perConnection(connections++)
          const state = { measured: true, unanswered: false }
          measuring.set(client, state)
          client.setRequests([{
            // autocannon asks for a request after every answer, and again when it re-opens the
            // connection: the request before is then still unanswered.
            setupRequest: (defaults) => {
              const { measured, request: next } = own.next(state.unanswered)
              state.unanswered = true
              state.measured = measured
              return { ...defaults, ...toAutocannon(next) }
            },
            onResponse: (status, body) => {
              state.unanswered = false
              own.answered(status, body)
            }
          }])
        }
      }),
      ...(options.reconnectEvery === undefined ? {} : { reconnectRate: options.reconnectEvery }),
      connections: options.connections,
      duration: options.durationSeconds,
      timeout: 10
    }, (error: unknown, result) => (error ? reject(error) : resolve(result)))
    // Told right after the connection's `onResponse`, before its next request is asked for.
    instance.on("response", (client, status, _bytes, milliseconds) => {
      if (!isSuccess(status)) return
      if (measuring.get(client)?.measured === false) unmeasuredSuccesses += 1
      else latencies.push(milliseconds)
    })
  })
  const answered = result["2xx"] - unmeasuredSuccesses
  const failed = result.non2xx + result.errors + result.mismatches + result.resets
  if (failed > 0 || latencies.length !== answered) {
    const statuses = Object.entries(result.statusCodeStats ?? {}).map(([status, { count }]) =>
      `${count ?? 0}× ${status}`
    ).join(", ")
    throw new Error(
      `${contender.name} ${request.method} ${request.path} at ${options.connections} connections: ` +
        `${result.non2xx} non-2xx answers (${statuses}), ${result.errors} errors (${result.timeouts} timeouts), ` +
        `${result.resets} skipped requests`
    )
  }
  const cpuAfter = contender.cpuSeconds?.()
  return {
    rps: answered / result.duration,
    p50_ms: percentile(latencies, 0.5),
    p99_ms: percentile(latencies, 0.99),
    requests: answered,
    ...(cpuBefore === undefined || cpuAfter === undefined || answered === 0
      ? {}
      : { cpu_us_per_request: ((cpuAfter - cpuBefore) * 1e6) / answered })
  }
}

export interface CompareOptions extends RoundOptions {
  readonly rounds: number
  /** Told after every round, for progress lines. */
  readonly onRound?: (name: string, round: number, figures: RoundFigures) => void
}

/** Anything that can run one round; HTTP contenders and in-process ones alike. */
export interface Runner {
  readonly name: string
  readonly round: (options: RoundOptions) => Promise<RoundFigures>
}

export const httpRunner = (contender: Contender): Runner => ({
  name: contender.name,
  round: (options) => runRound(contender, options)
})

/**
 * The runner's rounds with the database server's CPU per answered request beside the server's own
 * (`postgres_cpu_us_per_request`): every PostgreSQL process of the machine, the backends that
 * closed during the round included, so it counts any other load on that server too.
 */
export const withPostgresCpu = (runner: Runner): Runner => ({
  name: runner.name,
  round: async (options) => {
    const before = readPostgresCpuSeconds()
    const figures = await runner.round(options)
    const after = readPostgresCpuSeconds()
    return before === undefined || after === undefined || figures.requests === 0
      ? figures
      : { ...figures, postgres_cpu_us_per_request: ((after - before) * 1e6) / figures.requests }
  }
})

/**
 * Rounds of every runner, side by side: one round each, then the next round in
 * the opposite order, so drift over the run (caches, autovacuum, a noisy
 * neighbour) falls on all of them alike and round i of each is comparable.
 */
export const compareRounds = async (
  runners: ReadonlyArray<Runner>,
  options: CompareOptions
): Promise<ReadonlyMap<string, ReadonlyArray<RoundFigures>>> => {
  const results = new Map<string, Array<RoundFigures>>(runners.map((runner) => [runner.name, []]))
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? runners : [...runners].reverse()
    for (const runner of order) {
      const figures = await runner.round(options)
      results.get(runner.name)?.push(figures)
      options.onRound?.(runner.name, round + 1, figures)
    }
  }
  return results
}

export type Figures =
  & {
    readonly rps: Stat
    readonly p50_ms: Stat
    readonly p99_ms: Stat
  }
  & { readonly [K in typeof OPTIONAL_FIGURES[number]]?: Stat }

export const figuresOf = (rounds: ReadonlyArray<RoundFigures>): Figures => {
  const optional: Partial<Record<typeof OPTIONAL_FIGURES[number], Stat>> = {}
  for (const name of OPTIONAL_FIGURES) {
    const values = rounds.flatMap((r) => (r[name] === undefined ? [] : [r[name]]))
    if (values.length === rounds.length && rounds.length > 0) optional[name] = summarise(values)
  }
  return {
    rps: summarise(rounds.map((r) => r.rps)),
    p50_ms: summarise(rounds.map((r) => r.p50_ms)),
    p99_ms: summarise(rounds.map((r) => r.p99_ms)),
    ...optional
  }
}

/** Ratios of a measure of rounds run next to each other (round i against round i), summarised. */
export const pairedRatioOf = (
  subject: ReadonlyArray<RoundFigures>,
  reference: ReadonlyArray<RoundFigures>,
  name: string,
  measure: (figures: RoundFigures) => number | undefined
): Stat =>
  summarise(subject.map((figures, index) => {
    const against = reference[index]
    if (against === undefined) throw new Error("rounds to compare differ in number")
    const [mine, theirs] = [measure(figures), measure(against)]
    if (mine === undefined || theirs === undefined) throw new Error(`no ${name} to compare in round ${index + 1}`)
    return mine / theirs
  }))

/** Ratios of rounds run next to each other (round i against round i), summarised. */
export const pairedRatio = (
  subject: ReadonlyArray<RoundFigures>,
  reference: ReadonlyArray<RoundFigures>,
  metric: "rps" | "p50_ms" | "p99_ms" | "cpu_us_per_request"
): Stat => pairedRatioOf(subject, reference, metric, (figures) => figures[metric])

/** The server's and the database's CPU per request together: what a request costs the stack. */
export const stackCpuUsPerRequest = (figures: RoundFigures): number | undefined =>
  figures.cpu_us_per_request === undefined || figures.postgres_cpu_us_per_request === undefined
    ? undefined
    : figures.cpu_us_per_request + figures.postgres_cpu_us_per_request
