/**
 * `@account-api/client/web`: the HTTP client, the events (the pull and the live stream) and the
 * webhook verifier, with nothing of Node and no settlement producer (Redis): for browsers, edge
 * runtimes and bundles. The same classes as the package's main entry.
 */
export { API_VERSION } from "../../../src/Api.js"
export { eventTypes as EVENT_TYPES } from "../../../src/Domain/Events.js"
export { LIMIT_PERIODS, LIMIT_SCOPES, type LimitPeriod, type LimitScope } from "../../../src/Domain/SpendLimit.js"
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
  type ApproveRaiseBody,
  type CreateWebhookBody,
  type DeclineRaiseBody,
  type DirectoryQuery,
  type EffectiveLimitsQuery,
  type EventPagesQuery,
  type EventsQuery,
  type ExportQuery,
  type FieldError,
  type GrantsQuery,
  type LedgerQuery,
  type NewestEventsQuery,
  newIdempotencyKey,
  type PollOptions,
  PROBLEM_CODES,
  type ProblemCode,
  type RaiseRequestBody,
  type RaiseRequestsQuery,
  type RepositoryPolicyBody,
  type RetryOptions,
  type SessionsQuery,
  type SetBudgetBody,
  type SettingsBody,
  type SpendByDay,
  type SpendByDayQuery,
  type SpendDay,
  type SpendLimitsBody,
  type SpendQuery,
  type SpendSplit,
  type UpdateWebhookBody,
  type VoidGrantBody,
  type WebhookDeliveriesQuery
} from "./Http.js"
export {
  verifyWebhook,
  type WebhookEvent,
  type WebhookFailure,
  type WebhookHeaders,
  WebhookVerificationFailed
} from "./Webhooks.js"
