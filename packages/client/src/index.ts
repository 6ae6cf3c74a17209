/**
 * `@account-api/client`: the Account API for any TypeScript or JavaScript codebase, with
 * promises. `AccountApiClient` speaks HTTP (the pull and the live stream of events among it);
 * `SettlementClient` enqueues settlement jobs and runs sessions; `verifyWebhook` checks a
 * delivery. The Effect flavour is `@account-api/client/effect`.
 */
// Everything of the web entry (HTTP, events, the webhook verifier), from its one list.
export {
  EXTEND_TTL_SECONDS,
  jobIdOf,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_KINDS,
  SETTLEMENT_QUEUE
} from "../../../src/Settlement/Jobs.js"
export { SettlementEnqueueError, SettlementJobIdTaken } from "../../../src/Settlement/ProducerCore.js"
export {
  type ExtendPayload,
  type ReleasePayload,
  type ReservePayload,
  type RunSessionOptions,
  type Session,
  SessionCapReached,
  SessionRefused,
  SettlementClient,
  type SettlementError,
  type SettlementOptions,
  type SettlementResult,
  type SpendPayload
} from "./Settlement.js"
export * from "./web.js"
