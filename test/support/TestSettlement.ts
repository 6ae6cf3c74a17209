import { Layer } from "effect"
import { Accounts } from "../../src/Accounts.js"
import { Settlement } from "../../src/Settlement.js"
import { SettlementMetrics } from "../../src/Settlement/Metrics.js"
import { SettlementProducer } from "../../src/Settlement/Producer.js"
import { SettlementQueue } from "../../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../../src/Settlement/Worker.js"
import { DatabaseLive } from "../../src/Sql.js"
import { Wallets } from "../../src/Wallets.js"
import { TestConfig } from "./TestApp.js"

/**
 * A file's own database and Redis prefix with the settlement worker running
 * in-process, the typed producer, and the services tests arrange data with.
 */
export const TestSettlement = (overrides: Record<string, string> = {}) =>
  SettlementWorkerLive.pipe(
    Layer.provideMerge(Layer.mergeAll(SettlementProducer.Default, SettlementQueue.Default, Settlement.Default, SettlementMetrics.Default)),
    Layer.provideMerge(Layer.mergeAll(Wallets.Default, Accounts.Default)),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig(overrides))
  )
