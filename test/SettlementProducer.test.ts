import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { Wallets } from "../src/Wallets.js"
import { TestSettlement } from "./support/TestSettlement.js"

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
})
