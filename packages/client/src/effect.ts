/**
 * `@account-api/client/effect`: the contract for Effect codebases. `HttpApiClient.make(Api, { baseUrl })`
 * gives every operation typed, with the contract's errors in the error channel; `SettlementProducer`
 * is the producer as a service, `SettlementProducer.layer({ redisUrl })` its layer. `Event` and
 * `catalog` decode events (D17) to their types.
 */
export { Api, API_VERSION } from "../../../src/Api.js"
export { Authentication } from "../../../src/Auth/Api.js"
export * from "../../../src/Domain/Errors.js"
export { AlertsRecord, catalog, Event, EventPage, eventTypes, Threshold } from "../../../src/Domain/Events.js"
export { RepositoryNotFound } from "../../../src/Domain/Policy.js"
export { problemCode } from "../../../src/Domain/Problem.js"
export { InvalidCredentials } from "../../../src/Domain/SignIn.js"
export {
  BudgetBelowCommitted,
  IdempotencyInProgress,
  IdempotencyKeyReused,
  LedgerEntryNotFound,
  SessionNotFound
} from "../../../src/Domain/Wallet.js"
export * from "../../../src/Settlement/Jobs.js"
export { type Enqueued, SettlementEnqueueError, SettlementJobIdTaken } from "../../../src/Settlement/ProducerCore.js"
export { type Producer, type SettlementOptions, SettlementProducer } from "./Settlement.js"
