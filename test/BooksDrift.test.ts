import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { QueueEvents } from "bullmq"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { AppConfig } from "../src/Config.js"
import * as Money from "../src/Domain/Money.js"
import { Wallets } from "../src/Wallets.js"
import { ledgerVerify } from "./support/ledgerVerify.js"
import { freePort, serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D19's drift gauge, end to end: the real worker program checks the books every second, books
 * settled through plain BullMQ read 0, and a running total or a wallet row tampered with in the
 * database is reported by the first check that starts after it, and so is a credit grant's row
 * (D21); `cli ledger verify` names it and prints the same count as the gauge.
 */

const CHECK_SECONDS = 1

interface Reading {
  readonly drift: number | undefined
  readonly checkedAt: number | undefined
  readonly interval: number | undefined
}

/** A sample's value in a Prometheus text exposition, if the scrape has it. */
const valueOf = (text: string, name: string) => {
  const match = text.match(new RegExp(`^${name} (\\S+)$`, "m"))
  return match?.[1] === undefined ? undefined : Number(match[1])
}

const scrape = (port: number) =>
  Effect.promise(() => fetch(`http://127.0.0.1:${port}/metrics`).then((response) => response.text(), () => "")).pipe(
    Effect.map((text): Reading => ({
      drift: valueOf(text, "account_api_books_drift"),
      checkedAt: valueOf(text, "account_api_books_drift_checked_timestamp_seconds"),
      interval: valueOf(text, "account_api_books_drift_check_interval_seconds")
    }))
  )

layer(Accounts.Default.pipe(Layer.provideMerge(ProcessTestDatabase())), {
  excludeTestServices: true,
  timeout: "120 seconds"
})("the books drift gauge (D19)", (it) => {
  it.scoped(
    "a running total, then a wallet row, tampered with in the database: the gauge reports each within one check, and ledger verify names it",
    () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const sql = yield* SqlClient.SqlClient
        const prefix = `${config.redisPrefix}:drift`
        const port = yield* freePort
        const worker = yield* startService(
          "worker",
          serviceEnvironment(config, prefix, {
            BOOKS_DRIFT_CHECK_SECONDS: String(CHECK_SECONDS),
            WORKER_METRICS_PORT: String(port)
          })
        )
        /** The first check that started after `time` (ms), as the worker's gauges show it. */
        const checkAfter = (what: string, time: number) =>
          waitFor(
            what,
            Effect.map(scrape(port), (reading) =>
              reading.drift !== undefined && reading.checkedAt !== undefined && reading.checkedAt * 1000 > time
                ? Option.some(reading)
                : Option.none()),
            // One check a second: a few seconds is several checks' worth, for a loaded machine.
            { limit: "20 seconds", every: "100 millis", alive: [worker] }
          )

        // Sessions settled through plain BullMQ, attributed to a repository and a user.
        const queue = yield* settlementQueue(config, prefix)
        const events = yield* Effect.acquireRelease(
          Effect.sync(() =>
            new QueueEvents("settlement", { connection: { url: Redacted.value(config.redisUrl) }, prefix })
          ),
          (events) => Effect.promise(() => events.close())
        )
        yield* Effect.promise(() => events.waitUntilReady())
        const account = yield* newAccount("100")
        const repository = yield* Effect.orDie(
          Effect.flatMap(Accounts, (accounts) => accounts.createRepository(account.id, "agents"))
        )
        /** A job as a runner sends it; each of these applies. */
        const settle = (name: string, data: Record<string, string>) =>
          Effect.promise(async () => {
            const job = await queue.add(name, { account_id: account.id, idempotency_key: randomUUID(), ...data })
            return await job.waitUntilFinished(events, 30_000) as unknown
          }).pipe(Effect.map((result) => expect(result).toMatchObject({ status: "applied" })))
        const attribution = { repository_id: repository.id, user_id: account.id }
        // One session spends within its hold and releases the rest; the other spends beyond it (0.5 unfunded).
        yield* settle("reserve", { session_id: "within", amount_usd: "5", ...attribution })
        yield* settle("spend", { session_id: "within", amount_usd: "3" })
        yield* settle("release", { session_id: "within" })
        yield* settle("reserve", { session_id: "beyond", amount_usd: "5", ...attribution })
        yield* settle("spend", { session_id: "beyond", amount_usd: "3" })
        yield* settle("spend", { session_id: "beyond", amount_usd: "2.5" })
        const clean = yield* checkAfter("a check after the sessions were settled", Date.now())
        expect(clean).toMatchObject({ drift: 0, interval: CHECK_SECONDS })

        const [wallet] = yield* sql<{ id: string }>`SELECT id FROM wallets WHERE account_id = ${account.id}`
        const walletId = wallet?.id ?? ""
        const [total] = yield* sql<{ day: string; spent: string }>`
          SELECT day::text AS day, spent_usd::text AS spent FROM settlement_spend_totals WHERE wallet_id = ${walletId}`
        expect(total?.spent).toBe("8.500000")

        // A running total drifts from the entries behind the service's back.
        yield* sql`UPDATE settlement_spend_totals SET spent_usd = spent_usd + 1 WHERE wallet_id = ${walletId}`
        const totalDrifted = yield* checkAfter("a check after the total was changed", Date.now())
        expect(totalDrifted.drift).toBe(1)
        const namesTotal = yield* ledgerVerify(["--account", account.id], prefix)
        expect(namesTotal.status).toBe(1)
        const group = { day: total?.day, repository_id: repository.id, user_id: account.id }
        expect(JSON.parse(namesTotal.stdout)).toMatchObject({
          drift: 1,
          mismatches: [{
            wallet_id: walletId,
            account_id: account.id,
            check: "spend_totals",
            group,
            expected: { spent_usd: "8.500000", unfunded_usd: "0.500000" },
            found: { spent_usd: "9.500000", unfunded_usd: "0.500000" }
          }]
        })

        // Then the wallet row: its hold no longer what its newest entry says.
        yield* sql`UPDATE wallets SET reserved_usd = reserved_usd + 1 WHERE id = ${walletId}`
        const walletDrifted = yield* checkAfter("a check after the wallet row was changed", Date.now())
        expect(walletDrifted.drift).toBe(2)
        const namesWallet = yield* ledgerVerify(["--account", account.id], prefix)
        expect(namesWallet.status).toBe(1)
        const verdict = JSON.parse(namesWallet.stdout)
        expect(verdict.drift).toBe(2)
        expect(verdict.mismatches).toContainEqual({
          wallet_id: walletId,
          account_id: account.id,
          check: "wallet_row",
          expected: { budget_usd: "100.000000", reserved_usd: "0.000000", spent_usd: "8.500000", last_sequence: 7 },
          found: { budget_usd: "100.000000", reserved_usd: "1.000000", spent_usd: "8.500000", last_sequence: 7 }
        })

        // The whole books' run prints the count the gauge shows.
        const all = yield* ledgerVerify([], prefix)
        expect(all.status).toBe(1)
        expect(JSON.parse(all.stdout).drift).toBe(walletDrifted.drift)

        // Repaired, the books are clean again at the next check, and the command exits 0.
        yield* sql`UPDATE settlement_spend_totals SET spent_usd = spent_usd - 1 WHERE wallet_id = ${walletId}`
        yield* sql`UPDATE wallets SET reserved_usd = reserved_usd - 1 WHERE id = ${walletId}`
        expect((yield* checkAfter("a check after the repair", Date.now())).drift).toBe(0)
        const repaired = yield* ledgerVerify([], prefix)
        expect(repaired.status, repaired.stderr).toBe(0)
        expect(JSON.parse(repaired.stdout)).toMatchObject({ mismatches: [], drift: 0 })

        // A credit grant (D21) whose row no longer replays from its entries is counted too.
        const { grant } = yield* Effect.flatMap(Wallets, (wallets) =>
          wallets.addCredit(account, { amount_usd: Money.decimal("10"), idempotency_key: randomUUID() }))
        yield* settle("reserve", { session_id: "granted", amount_usd: "4" })
        yield* settle("spend", { session_id: "granted", amount_usd: "3" })
        yield* settle("release", { session_id: "granted" })
        expect((yield* checkAfter("a check after the grant was drawn", Date.now())).drift).toBe(0)
        yield* sql`UPDATE wallet_grants SET drawn_usd = drawn_usd + 1 WHERE id = ${grant.id}`
        const grantDrifted = yield* checkAfter("a check after the grant was changed", Date.now())
        expect(grantDrifted.drift).toBe(1)
        const namesGrant = yield* ledgerVerify([], prefix)
        expect(namesGrant.status).toBe(1)
        expect(JSON.parse(namesGrant.stdout)).toMatchObject({
          drift: 1,
          mismatches: [{
            wallet_id: walletId,
            account_id: account.id,
            check: "grant",
            grant_id: grant.id,
            expected: { amount_usd: "10.000000", drawn_usd: "3.000000", state: "live" },
            found: { amount_usd: "10.000000", drawn_usd: "4.000000", state: "live" }
          }]
        })
        yield* sql`UPDATE wallet_grants SET drawn_usd = drawn_usd - 1 WHERE id = ${grant.id}`
        expect((yield* checkAfter("a check after the grant's repair", Date.now())).drift).toBe(0)
        expect(worker.running()).toBe(true)
      }).pipe(Effect.orDie)
  )
})
