import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../../src/Accounts.js"
import { Credentials } from "../../src/Auth/Credentials.js"
import type { Account } from "../../src/Domain/Account.js"
import * as Money from "../../src/Domain/Money.js"
import { Settlement } from "../../src/Settlement.js"
import { SettlementMetrics } from "../../src/Settlement/Metrics.js"
import { SettlementProducer } from "../../src/Settlement/Producer.js"
import { SettlementQueue } from "../../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../../src/Settlement/Worker.js"
import { DatabaseLive } from "../../src/Sql.js"
import { Wallets } from "../../src/Wallets.js"
import { PASSWORD, TestConfig } from "./TestApp.js"

/**
 * A file's own database and Redis prefix with the settlement worker running
 * in-process, the typed producer, and the services tests arrange data with.
 */
export const TestSettlement = (overrides: Record<string, string> = {}) =>
  SettlementWorkerLive.pipe(
    Layer.provideMerge(
      Layer.mergeAll(SettlementProducer.Default, SettlementQueue.Default, Settlement.Default, SettlementMetrics.Default)
    ),
    Layer.provideMerge(Layer.mergeAll(Wallets.Default, Accounts.Default, Credentials.Default)),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig(overrides))
  )

/** A fresh account (a user of their own) with its wallet, optionally enforced at a budget. */
export const newAccount = (budget?: string) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const wallets = yield* Wallets
    const user = yield* credentials.createUser({
      email: `settle-${randomUUID()}@example.com`,
      name: "Runner",
      isAdmin: false,
      organisationId: Option.none(),
      password: PASSWORD
    })
    const account: Account = { kind: "user", id: user.id }
    if (budget !== undefined) {
      yield* wallets.setBudget(account, { budget_usd: Money.decimal(budget) })
    }
    return account
  }).pipe(Effect.orDie)
