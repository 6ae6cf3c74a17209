// Screenshots of the console (D20) for docs/console.md and the README: the overview and the
// spend page, at a desktop's 1280x800 and a phone's 375 px, into docs/console/*.png.
//
//   node scripts/console-screenshots.mjs
//
// It makes a database of its own on DATABASE_URL's server (PostgreSQL at localhost:5432 when
// unset) and a key prefix of its own on REDIS_URL (127.0.0.1:6379), runs the CLI, the API, the
// worker and webhooks as `npm start` does (scripts/programs.mjs), seeds an organisation through
// them as people would (the CLI for people and repositories, the API for the budget and limits,
// plain BullMQ for the sessions' spending, one session left open), signs in through the
// console's form in Chromium, and removes the database and keys when done.
import { Queue, QueueEvents } from "bullmq"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync } from "node:fs"
import { createServer } from "node:net"
import { userInfo } from "node:os"
import path from "node:path"
import pg from "pg"
import { chromium } from "playwright-core"
import { ensureBuilt, programCommand, ROOT } from "./programs.mjs"

const CHROMIUM = "/usr/bin/chromium"
const OUT = path.join(ROOT, "docs", "console")
const PASSWORD = "screenshots-password-1"
const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 375, height: 800 } }

const databaseServer = new URL(process.env.DATABASE_URL ?? "postgres://localhost:5432/postgres")
// As libpq does: no user in the address means the OS user.
if (databaseServer.username === "") databaseServer.username = process.env.PGUSER ?? userInfo().username
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const suffix = `${process.pid}_${randomBytes(3).toString("hex")}`
const database = `account_api_screens_${suffix}`
const prefix = `account-api-screens-${suffix}`

const log = (message) => process.stderr.write(`[console-screenshots] ${message}\n`)

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const withMaintenance = async (use) => {
  const url = new URL(databaseServer)
  url.pathname = "/postgres"
  const client = new pg.Client({ connectionString: url.href })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

const port = await freePort()
const base = `http://127.0.0.1:${port}`
const databaseUrl = Object.assign(new URL(databaseServer), { pathname: `/${database}` }).href
const environment = {
  ...process.env,
  NODE_ENV: "development",
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: prefix,
  SETTLEMENT_QUEUE_PREFIX: prefix,
  AUTH_SECRET: randomBytes(32).toString("hex"),
  PORT: String(port),
  LOG_LEVEL: "warning"
}

/** Runs the CLI with `args` (and `input` on its standard input); resolves to its JSON answer. */
const cli = (args, input = "") =>
  new Promise((resolve, reject) => {
    const [file, programArgs, own] = programCommand("cli", { args })
    const child = spawn(file, programArgs, { cwd: ROOT, env: { ...environment, ...own } })
    let output = ""
    let errors = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (errors += chunk))
    child.once("exit", (code) =>
      code === 0 ? resolve(JSON.parse(output)) : reject(new Error(`cli ${args.join(" ")}: ${errors}`)))
    child.stdin.end(input)
  })

const started = []
const start = (program) => {
  const [file, args, own] = programCommand(program)
  const child = spawn(file, args, {
    cwd: ROOT,
    env: { ...environment, ...own },
    stdio: ["ignore", "inherit", "inherit"]
  })
  started.push(child)
  return child
}

const api = async (method, route, token, body) => {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${await response.text()}`)
  return response.status === 204 ? undefined : response.json()
}

const waitForApi = async () => {
  for (let tries = 0; tries < 120; tries++) {
    const ready = await fetch(`${base}/readyz`).then((response) => response.ok, () => false)
    if (ready) return
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  throw new Error("the API did not become ready in 60 s")
}

const deleteKeys = async () => {
  const { Redis } = await import("ioredis")
  const redis = new Redis(redisUrl)
  try {
    let cursor = "0"
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500)
      if (keys.length > 0) await redis.del(...keys)
      cursor = next
    } while (cursor !== "0")
  } finally {
    redis.disconnect()
  }
}

try {
  ensureBuilt(log)
  await withMaintenance((client) => client.query(`CREATE DATABASE "${database}"`))
  await cli(["migrate"])
  const org = await cli(["org", "create", "--name", "Acme Robotics"])
  const admin = await cli(
    ["user", "create", "--email", "ada@acme.example", "--name", "Ada Admin", "--admin", "--org", org.id],
    PASSWORD
  )
  const member = await cli(
    ["user", "create", "--email", "bo@acme.example", "--name", "Bo Member", "--org", org.id],
    PASSWORD
  )
  const repositories = []
  for (const name of ["web-app", "billing", "infra"]) {
    repositories.push((await cli(["repo", "create", "--account", org.id, "--name", name])).id)
  }
  start("api")
  start("worker")
  start("webhooks")
  await waitForApi()

  const { access_token: adminToken } = await fetch(`${base}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: "ada@acme.example", password: PASSWORD })
  }).then((response) => response.json())
  await api("PUT", "/developer/account/wallet", adminToken, { budget_usd: "250", idempotency_key: "screens-budget" })
  const limits = await api("GET", "/developer/account/limits", adminToken)
  await api("PUT", "/developer/account/limits", adminToken, {
    expected_version: limits.version,
    limits: [
      { scope: "account", period: "month", amount_usd: "200" },
      { scope: "repository", scope_id: repositories[0], period: "day", amount_usd: "40" },
      { scope: "session", period: "session", amount_usd: "25" }
    ]
  })

  // The runners, as the README writes them: plain BullMQ.
  const { Redis } = await import("ioredis")
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null })
  const queue = new Queue("settlement", { connection, prefix })
  const events = new QueueEvents("settlement", { connection: { url: redisUrl }, prefix })
  await events.waitUntilReady()
  const settle = async (name, data) => {
    const job = await queue.add(name, { account_id: org.id, ...data })
    const result = await job.waitUntilFinished(events, 30_000)
    if (result.status !== "applied") throw new Error(`${name} ${data.session_id}: ${JSON.stringify(result)}`)
  }
  const runs = [
    { session: "nightly-build-1", repository: 0, user: member.id, spends: ["3.25", "1.5"], open: false },
    { session: "refactor-auth", repository: 1, user: admin.id, spends: ["6.125"], open: false },
    { session: "infra-plan", repository: 2, user: member.id, spends: ["2.4"], open: false },
    { session: "nightly-build-2", repository: 0, user: admin.id, spends: ["4.75"], open: true },
    { session: "docs-sweep", repository: 1, user: member.id, spends: ["0.9"], open: true }
  ]
  for (const run of runs) {
    await settle("reserve", {
      session_id: run.session,
      amount_usd: "10",
      idempotency_key: `${run.session}-reserve`,
      repository_id: repositories[run.repository],
      user_id: run.user
    })
    for (const [index, amount] of run.spends.entries()) {
      await settle("spend", { session_id: run.session, amount_usd: amount, idempotency_key: `${run.session}-${index}` })
    }
    if (!run.open) await settle("release", { session_id: run.session, idempotency_key: `${run.session}-release` })
  }
  await events.close()
  await queue.close()
  await connection.quit()

  mkdirSync(OUT, { recursive: true })
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu"]
  })
  try {
    for (const [name, viewport] of Object.entries(VIEWPORTS)) {
      const page = await browser.newPage({ viewport })
      await page.goto(`${base}/console`)
      await page.getByLabel("Email").fill("ada@acme.example")
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Sign in" }).click()
      await page.getByRole("row").filter({ hasText: "docs-sweep" }).first().waitFor()
      await page.locator(".chart svg").first().waitFor()
      await page.screenshot({ path: path.join(OUT, `overview-${name}.png`), fullPage: name === "desktop" })
      await page.getByRole("link", { name: "Spend", exact: true }).click()
      await page.locator(".chart svg").first().waitFor()
      await page.getByRole("row").filter({ hasText: "Total" }).waitFor()
      await page.screenshot({ path: path.join(OUT, `spend-${name}.png`), fullPage: name === "desktop" })
      await page.close()
      log(`wrote docs/console/overview-${name}.png and spend-${name}.png`)
    }
  } finally {
    await browser.close()
  }
} finally {
  for (const child of started) child.kill("SIGTERM")
  await Promise.all(
    started.map((child) => new Promise((resolve) => child.exitCode !== null ? resolve() : child.once("exit", resolve)))
  )
  await withMaintenance((client) => client.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)).catch(() => {})
  await deleteKeys().catch(() => {})
}
