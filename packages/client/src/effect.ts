/**
 * `@account-api/client/effect`: the contract for Effect codebases. `HttpApiClient.make(Api, { baseUrl })`
 * gives every operation typed, with the contract's errors in the error channel. `Event` and
 * `catalog` decode events (D17) to their types. The producer as a service, `SettlementProducer`,
 * is `@account-api/client/settlement`'s, beside the queue's contract.
 */
export { Api, API_VERSION } from "../../../src/Api.js"
export { Authentication } from "../../../src/Auth/Middleware.js"
export * from "../../../src/Domain/Errors.js"
export { AlertsRecord, catalog, Event, EventPage, eventTypes, Threshold } from "../../../src/Domain/Events.js"
export { GrantNotFound, GrantNotLive } from "../../../src/Domain/Grants.js"
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
