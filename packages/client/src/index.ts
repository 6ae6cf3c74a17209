/**
 * `@account-api/client`: the Account API for any TypeScript or JavaScript codebase, with
 * promises. `AccountApiClient` speaks HTTP (the pull and the live stream of events among it);
 * `SettlementClient` enqueues settlement jobs and runs sessions; `verifyWebhook` checks a
 * delivery. The Effect flavour is `@account-api/client/effect`.
 */
export { API_VERSION } from "../../../src/Api.js"
export { eventTypes as EVENT_TYPES } from "../../../src/Domain/Events.js"
export {
  EXTEND_TTL_SECONDS,
  jobIdOf,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_KINDS,
  SETTLEMENT_QUEUE
} from "../../../src/Settlement/Jobs.js"
export { SettlementEnqueueError, SettlementJobIdTaken } from "../../../src/Settlement/ProducerCore.js"
export {
  type AccountEvent,
  type AccountEventOf,
  type AccountEventPage,
  type EventType,
  type StreamOptions
} from "./Events.js"
export {
  AccountApiClient,
  type AccountApiClientOptions,
  AccountApiError,
  type AccountPolicyBody,
  type AddCreditBody,
  type AlertsBody,
  type EventsQuery,
  type ExportQuery,
  type FieldError,
  type LedgerQuery,
  type PollOptions,
  PROBLEM_CODES,
  type ProblemCode,
  type RepositoryPolicyBody,
  type RetryOptions,
  type SessionsQuery,
  type SetBudgetBody,
  type SpendLimitsBody,
  type SpendQuery
} from "./Http.js"
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
export {
  verifyWebhook,
  type WebhookEvent,
  type WebhookFailure,
  type WebhookHeaders,
  WebhookVerificationFailed
} from "./Webhooks.js"
