import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { jobIdOf } from "../src/Settlement/Jobs.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { Wallets } from "../src/Wallets.js"
import { waitFor } from "./support/processes.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

layer(TestSettlement(), { excludeTestServices: true, timeout: "60 seconds" })("settlement producer", (it) => {
  describe("waiting for results", () => {
    it.effect("a runner may wait on many jobs at once without listener-leak warnings", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const wallets = yield* Wallets
        const producer = yield* SettlementProducer
        const organisation = yield* accounts.createOrganisation("Many waits").pipe(Effect.orDie)
        const account = new Account({ kind: "client", id: organisation.id })
        yield* wallets.setBudget(account, { budget_usd: Money.decimal("100") })
        const warnings: Array<string> = []
        const onWarning = (warning: Error) => warnings.push(warning.name)
        process.on("warning", onWarning)
        const results = yield* Effect.all(
          Array.from({ length: 30 }, (_, i) =>
            Effect.flatMap(
              producer.enqueueReserve({
                account_id: account.id,
                session_id: `s-${i}`,
                amount_usd: "1",
                idempotency_key: randomUUID()
              }),
              (job) => job.result()
            )),
          { concurrency: "unbounded" }
        ).pipe(Effect.ensuring(Effect.sync(() => process.off("warning", onWarning))))
        expect(results.every((result) => result.status === "applied")).toBe(true)
        expect(warnings.filter((name) => name === "MaxListenersExceededWarning")).toEqual([])
        const wallet = yield* wallets.get(account)
        expect(Money.format(wallet.reserved_usd)).toBe("30.000000")
      }))
  })

  describe("the job under its id is the job sent (D8)", () => {
    it.effect("a job id squatted by another job first is refused loudly, not answered with the squatter's result", () =>
      Effect.gen(function*() {
        const producer = yield* SettlementProducer
        const wallets = yield* Wallets
        const victim = yield* newAccount("10")
        const squatter = yield* newAccount("10")
        const key = randomUUID()
        const jobId = jobIdOf(victim.id, key)
        // Whoever can write the queue adds a job of their own under the id the victim's job derives.
        yield* Effect.promise(() =>
          producer.queue.add("reserve", {
            account_id: squatter.id,
            session_id: "squat",
            amount_usd: "7",
            idempotency_key: "squat-key"
          }, { jobId })
        )
        yield* waitFor(
          "the squatter's job completes",
          Effect.map(
            Effect.promise(() => producer.queue.getJob(jobId)),
            (job) => job?.finishedOn === undefined ? Option.none() : Option.some(job)
          ),
          { limit: "20 seconds" }
        )
        const refused = yield* Effect.flip(
          Effect.flatMap(
            producer.enqueueReserve({
              account_id: victim.id,
              session_id: "mine",
              amount_usd: "1",
              idempotency_key: key
            }),
            (job) => job.result("10 seconds")
          )
        )
        expect(refused._tag).toBe("SettlementJobIdTaken")
        expect(refused.message).toContain(`job ${jobId} is another job`)
        expect(refused.message).toMatch(/account_id.*amount_usd.*idempotency_key.*session_id/)
        // Neither the victim's money moved nor did the squatter's job run twice.
        expect(Money.format((yield* wallets.get(victim)).reserved_usd)).toBe("0.000000")
        expect(Money.format((yield* wallets.get(squatter)).reserved_usd)).toBe("7.000000")
      }))

    it.effect("the same job added first by a plain producer is the job sent: its result is answered", () =>
      Effect.gen(function*() {
        const producer = yield* SettlementProducer
        const account = yield* newAccount("10")
        const payload = { account_id: account.id, session_id: "shared", amount_usd: "2", idempotency_key: randomUUID() }
        yield* Effect.promise(() =>
          producer.queue.add("reserve", payload, { jobId: jobIdOf(account.id, payload.idempotency_key) })
        )
        const result = yield* Effect.flatMap(producer.enqueueReserve(payload), (job) => job.result())
        expect(result).toMatchObject({ status: "applied", wallet: { reserved_usd: "2.000000" } })
      }))

    it.effect("labels and a model are the job's (D19): the same labels in another order are the same job, others another", () =>
      Effect.gen(function*() {
        const producer = yield* SettlementProducer
        const account = yield* newAccount("10")
        const base = { account_id: account.id, session_id: `s-${randomUUID()}`, amount_usd: "2" }
        // A plain producer wrote its labels in its own order; the typed producer's are sorted otherwise.
        const reserve = { ...base, idempotency_key: randomUUID() }
        yield* Effect.promise(() =>
          producer.queue.add("reserve", { ...reserve, labels: { team: "search", env: "ci" } }, {
            jobId: jobIdOf(account.id, reserve.idempotency_key)
          })
        )
        const same = yield* Effect.flatMap(
          producer.enqueueReserve({ ...reserve, labels: { env: "ci", team: "search" } }),
          (job) => job.result()
        )
        expect(same).toMatchObject({ status: "applied", wallet: { reserved_usd: "2.000000" } })

        const other = { ...base, idempotency_key: randomUUID() }
        yield* Effect.promise(() =>
          producer.queue.add("reserve", { ...other, labels: { team: "ads" } }, {
            jobId: jobIdOf(account.id, other.idempotency_key)
          })
        )
        const refused = yield* Effect.flip(
          Effect.flatMap(producer.enqueueReserve({ ...other, labels: { team: "search" } }), (job) => job.result())
        )
        expect(refused._tag).toBe("SettlementJobIdTaken")
        expect(refused.message).toContain("(its labels differ from this reserve's)")

        const spend = { ...base, amount_usd: "1", idempotency_key: randomUUID() }
        yield* Effect.promise(() =>
          producer.queue.add("spend", { ...spend, model: "model-a" }, {
            jobId: jobIdOf(account.id, spend.idempotency_key)
          })
        )
        const spendRefused = yield* Effect.flip(
          Effect.flatMap(producer.enqueueSpend({ ...spend, model: "model-b" }), (job) => job.result())
        )
        expect(spendRefused.message).toContain("(its model differ from this spend's)")
      }))
  })
})
