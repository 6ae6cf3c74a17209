import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import path from "node:path"
import { parse } from "yaml"
import { ROOT } from "../scripts/programs.mjs"
import { serveOn } from "../src/Http.js"
import { Metrics } from "../src/Metrics.js"
import { WorkerMetricsListenerLive } from "../src/Settlement/MetricsListener.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { WebhookMetricsListenerLive } from "../src/Webhooks/MetricsListener.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { childEnvironment } from "./support/childEnvironment.js"
import { freePort } from "./support/processes.js"
import { call } from "./support/TestApp.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * D18: the alert rules and the dashboard that ship in `ops/` are valid, fire on
 * what they watch, and name only metrics the service really exports (read from
 * a real scrape), so a renamed metric breaks this test, not an operator's night.
 */

const PROMETHEUS_DIR = path.join(ROOT, "ops", "prometheus")
const DASHBOARD = path.join(ROOT, "ops", "grafana", "account-api.json")

/** Series Prometheus makes itself, not the service. */
const PROMETHEUS_OWN = new Set(["up"])

const PROMQL_WORDS = new Set(["and", "or", "unless", "bool", "offset", "inf", "nan"])

/**
 * The metric names a PromQL expression selects: identifiers that are not
 * functions, keywords, label names (in `{…}`, `by (…)`, `on (…)`) or durations.
 */
export const metricNames = (expression: string): Array<string> => {
  const bare = expression
    .replace(/"(?:[^"\\]|\\.)*"/g, "\"\"")
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
  return [...bare.matchAll(/(?<![\w.$])([a-zA-Z_:][\w:]*)\s*(\(?)/g)].flatMap((match) => {
    const name = match[1] ?? ""
    return match[2] === "" && !PROMQL_WORDS.has(name.toLowerCase()) ? [name] : []
  })
}

interface Sample {
  readonly name: string
  readonly labels: ReadonlyArray<string>
}

/** Each sample of a Prometheus text exposition: its name and its label names. */
const samplesOf = (exposition: string): Array<Sample> =>
  exposition.split("\n").flatMap((line) => {
    const match = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/)
    if (match === null) return []
    const labels = [...(match[2] ?? "").matchAll(/(\w+)="/g)].map((label) => label[1] ?? "").sort()
    return [{ name: match[1] ?? "", labels }]
  })

/** A series selector of a promtool test (`name{label="value",…}`): its name, label names and job. */
const seriesOf = (selector: string): Sample & { readonly job: string | undefined } => {
  const match = selector.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?$/)
  return {
    name: match?.[1] ?? selector,
    labels: [...(match?.[2] ?? "").matchAll(/(\w+)="/g)].map((label) => label[1] ?? "").sort(),
    job: /\bjob="([^"]*)"/.exec(match?.[2] ?? "")?.[1]
  }
}

interface RuleFile {
  readonly groups: ReadonlyArray<{ readonly rules: ReadonlyArray<{ readonly alert: string; readonly expr: string }> }>
}
interface RuleTests {
  readonly tests: ReadonlyArray<{ readonly input_series: ReadonlyArray<{ readonly series: string }> }>
}
interface Dashboard {
  readonly panels: ReadonlyArray<{ readonly title: string; readonly targets: ReadonlyArray<{ readonly expr: string }> }>
}

const rules = parse(readFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), "utf8")) as RuleFile
const ruleTests = parse(readFileSync(path.join(PROMETHEUS_DIR, "alerts.test.yml"), "utf8")) as RuleTests
const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as Dashboard

const alertExpressions = rules.groups.flatMap((group) => group.rules.map((rule) => [rule.alert, rule.expr] as const))
const dashboardExpressions = dashboard.panels.flatMap((panel) =>
  panel.targets.map((target) => [panel.title, target.expr] as const)
)

const promtool = spawnSync("promtool", ["--version"], { encoding: "utf8", env: childEnvironment() })
const promtoolMissing = promtool.error !== undefined || promtool.status !== 0

describe("promtool", () => {
  if (promtoolMissing) {
    it.skip(
      "SKIPPED: promtool is not on PATH; install Debian's `prometheus` package (`bash scripts/ci-prerequisites.sh` as root)",
      () => {}
    )
    return
  }
  it("checks ops/prometheus/alerts.yml", () => {
    const checked = spawnSync("promtool", ["check", "rules", "alerts.yml"], {
      cwd: PROMETHEUS_DIR,
      encoding: "utf8",
      env: childEnvironment()
    })
    expect(checked.status, `${checked.stdout}${checked.stderr}`).toBe(0)
    expect(checked.stdout).toContain(`SUCCESS: ${alertExpressions.length} rules found`)
  })

  it("runs ops/prometheus/alerts.test.yml: every rule fires on its series and not before", () => {
    const tested = spawnSync("promtool", ["test", "rules", "alerts.test.yml"], {
      cwd: PROMETHEUS_DIR,
      encoding: "utf8",
      env: childEnvironment()
    })
    expect(tested.status, `${tested.stdout}${tested.stderr}`).toBe(0)
    expect(tested.stdout).toContain("SUCCESS")
    const testedAlerts = new Set(
      [...readFileSync(path.join(PROMETHEUS_DIR, "alerts.test.yml"), "utf8").matchAll(/alertname: (\w+)/g)].map((
        match
      ) => match[1])
    )
    for (const [alert] of alertExpressions) expect(testedAlerts, `${alert} has no unit test`).toContain(alert)
  })
})

describe("reading metric names out of PromQL", () => {
  it("keeps metrics and drops functions, keywords, label names and durations", () => {
    expect(
      metricNames(
        `sum by (job, le) (rate(foo_total{status=~"5..",job="$api_job"}[$__rate_interval])) / on (job) bar_seconds_bucket > 0.5 or vector(0)`
      )
    ).toEqual(["foo_total", "bar_seconds_bucket"])
    expect(metricNames(`up{job=~"a|b"} == 0 and max without (instance) (deriv(q{s="w"}[5m])) > 0`)).toEqual(["up", "q"])
  })
})

/** Where the worker and the webhooks process serve their own metrics (`*_METRICS_PORT`). */
class ProcessMetricsPorts extends Context.Tag("test/ProcessMetricsPorts")<
  ProcessMetricsPorts,
  { readonly worker: number; readonly webhooks: number }
>() {}

/**
 * The API, the worker and the webhooks process side by side, as `npm start` runs them, so the
 * scrapes carry settlement and webhook series, each queue process's metrics listener on a port of
 * its own with a registry of its own (`Layer.fresh`), as in a process of its own.
 */
const ApiBesideWorkers = Layer.unwrapEffect(
  Effect.map(Effect.all([freePort, freePort]), ([worker, webhooks]) =>
    serveOn(NodeHttpServer.layerTest).pipe(
      Layer.provideMerge(WorkerMetricsListenerLive.pipe(Layer.provide(Layer.fresh(Metrics.Default)))),
      Layer.provideMerge(
        Layer.merge(WebhookWorkerLive, WebhookMetricsListenerLive).pipe(Layer.provide(Layer.fresh(Metrics.Default)))
      ),
      Layer.provideMerge(
        TestSettlement({ WORKER_METRICS_PORT: String(worker), WEBHOOK_WORKER_METRICS_PORT: String(webhooks) })
      ),
      Layer.merge(Layer.succeed(ProcessMetricsPorts, { worker, webhooks }))
    ))
)

/** The Prometheus job each kind of process is scraped as, and the dashboard's variable for it. */
const JOBS = {
  api: { job: "account-api", variable: "$api_job" },
  worker: { job: "account-api-worker", variable: "$worker_job" },
  webhooks: { job: "account-api-webhooks", variable: "$webhooks_job" }
} as const
type Process = keyof typeof JOBS

/** The queue processes an expression is about (by job or dashboard variable), whose own metrics must show its names. */
const aboutProcesses = (expression: string): ReadonlyArray<Process> =>
  (["worker", "webhooks"] as const).filter((process) =>
    new RegExp(`${JOBS[process].variable.replace("$", "\\$")}\\b|${JOBS[process].job}\\b`).test(expression)
  )

const scrapeOf = (port: number) =>
  Effect.promise(() => fetch(`http://127.0.0.1:${port}/metrics`).then((response) => response.text()))

layer(ApiBesideWorkers, { excludeTestServices: true, timeout: "60 seconds" })("against a real scrape", (it) => {
  /** What each process shows: the API once a settlement job has been counted, the queue processes' own ports. */
  const scrape = Effect.gen(function*() {
    const account = yield* newAccount("1")
    const producer = yield* SettlementProducer
    const job = yield* producer.enqueueReserve({
      account_id: account.id,
      session_id: randomUUID(),
      amount_usd: "0.5",
      idempotency_key: randomUUID()
    })
    expect((yield* job.result()).status).toBe("applied")
    yield* call("GET", "/no/such/route")
    // The worker publishes its counters every few seconds.
    const api = yield* call("GET", "/metrics").pipe(
      Effect.map((reply) => String(reply.body)),
      Effect.filterOrFail((body) => body.includes("account_api_settlement_jobs_total{")),
      Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("20 seconds"))),
      Effect.orDie
    )
    const ports = yield* ProcessMetricsPorts
    // The worker shows the books drift figure once its first check has run, at its start (D19).
    const worker = yield* scrapeOf(ports.worker).pipe(
      Effect.filterOrFail((body) => /^account_api_books_drift \S+$/m.test(body)),
      Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("20 seconds"))),
      Effect.orDie
    )
    const scrapes: Record<Process, Array<Sample>> = {
      api: samplesOf(api),
      worker: samplesOf(worker),
      webhooks: samplesOf(yield* scrapeOf(ports.webhooks))
    }
    return scrapes
  })

  it.effect("every expression of alerts.yml and of the dashboard names only metrics the service exports", () =>
    Effect.gen(function*() {
      const scrapes = yield* scrape
      const namesOf = (process: Process) => new Set(scrapes[process].map((sample) => sample.name))
      const exported = new Set([...namesOf("api"), ...namesOf("worker"), ...namesOf("webhooks")])
      for (const process of ["worker", "webhooks"] as const) {
        expect(namesOf(process).has("process_cpu_seconds_total"), process).toBe(true)
      }
      // Each series where its process shows it: webhook series on the webhooks process alone.
      expect(namesOf("webhooks").has("account_api_webhook_deliveries_total")).toBe(true)
      expect(namesOf("worker").has("account_api_webhook_deliveries_total")).toBe(false)
      expect(namesOf("api").has("account_api_webhook_deliveries_total")).toBe(false)
      const expressions = [...alertExpressions, ...dashboardExpressions]
      expect(expressions.length).toBeGreaterThan(20)
      for (const [where, expression] of expressions) {
        const names = metricNames(expression)
        expect(names.length, `${where}: ${expression} selects no metric`).toBeGreaterThan(0)
        for (const name of names) {
          if (PROMETHEUS_OWN.has(name)) continue
          expect(exported.has(name), `${where}: ${name} is not exported by the service`).toBe(true)
          for (const process of aboutProcesses(expression)) {
            expect(namesOf(process).has(name), `${where}: ${name} is not on the ${process} process`).toBe(true)
          }
        }
      }
    }))

  it.effect("the unit tests' input series have the names and labels of a real scrape of their job's process", () =>
    Effect.gen(function*() {
      const scrapes = yield* scrape
      const series = ruleTests.tests.flatMap((test) => test.input_series.map((input) => seriesOf(input.series)))
      expect(series.length).toBeGreaterThan(10)
      for (const { job, labels, name } of series) {
        if (PROMETHEUS_OWN.has(name)) continue
        const process = (Object.keys(JOBS) as Array<Process>).find((key) => JOBS[key].job === job)
        expect(process, `${name}: job "${job ?? ""}" is none of the service's`).toBeDefined()
        // Prometheus adds job and instance to what it scrapes.
        const own = labels.filter((label) => label !== "job" && label !== "instance").join(",")
        const found = scrapes[process ?? "api"].filter((sample) => sample.name === name).map((sample) =>
          sample.labels.join(",")
        )
        expect(found, `${name}{${own}} is not in the scrape of ${job ?? ""}`).toContain(own)
      }
    }))
})
