import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import { DateTime, Either, Schema } from "effect"
import { Api } from "../../../src/Api.js"
import type { LoginRequest } from "../../../src/Auth/Api.js"
import { MemberNotFound, type MemberPage, type RepositoryPage } from "../../../src/Domain/Directory.js"
import type { EffectiveLimits, EffectiveQuery } from "../../../src/Domain/EffectiveLimits.js"
import * as Errors from "../../../src/Domain/Errors.js"
import type { AlertsRecord, EventOrder, EventType } from "../../../src/Domain/Events.js"
import { type Grant, type GrantList, GrantNotFound, GrantNotLive, GrantState } from "../../../src/Domain/Grants.js"
import type { AccountPolicyRecord, RepositoryPolicyRecord } from "../../../src/Domain/Policy.js"
import { RepositoryNotFound } from "../../../src/Domain/Policy.js"
import { problemCode } from "../../../src/Domain/Problem.js"
import type {
  ApprovedRaiseRequest,
  ApproveRaiseRequest,
  CreateRaiseRequest,
  DeclinedRaiseRequest,
  DeclineRaiseRequest,
  PendingRaiseRequest,
  RaiseRequestFilter,
  RaiseRequestList
} from "../../../src/Domain/RaiseRequests.js"
import type { AccountSettings, ReplaceSettingsRequest } from "../../../src/Domain/Settings.js"
import { InvalidCredentials, type LoginResponse, type MeResponse } from "../../../src/Domain/SignIn.js"
import type {
  ReplaceSpendLimitsRequest,
  SpendGroup,
  SpendGroupBy,
  SpendLimits,
  SpendReport
} from "../../../src/Domain/Spend.js"
import {
  BudgetBelowCommitted,
  type CreditAdded,
  IdempotencyInProgress,
  IdempotencyKeyReused,
  LedgerEntryNotFound,
  type LedgerPage,
  SessionNotFound,
  type Wallet,
  type WalletAsOf,
  type WalletRead,
  type WalletSessionDetail,
  type WalletSessionPage
} from "../../../src/Domain/Wallet.js"
import {
  type CreateWebhookRequest,
  type Redelivery,
  type RotatedSecret,
  type UpdateWebhookRequest,
  type WebhookDeliveryList,
  type WebhookEndpoint,
  type WebhookEndpointList,
  type WebhookEndpointWithSecret,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused
} from "../../../src/Domain/Webhooks.js"
import type { AlertsRequest } from "../../../src/Events/Api.js"
import type { AccountPolicyRequest, RepositoryPolicyRequest } from "../../../src/Policies/Api.js"
import type { Capabilities } from "../../../src/Policies/Capabilities.js"
import type {
  AddCreditRequest,
  GrantsQuery as GrantsUrlParams,
  SetBudgetRequest,
  VoidGrantRequest
} from "../../../src/Wallets/Api.js"
import { type AccountEvent, type AccountEventPage, pause, readStream, type StreamOptions } from "./Events.js"

/**
 * The contract's HTTP operations for any TypeScript or JavaScript codebase: promises, the wire's
 * JSON (amounts are decimal strings, times ISO 8601 strings), typed by the contract's own schemas
 * (`src/Api.ts`), whose paths and methods it reads too.
 */

/** Every error the contract declares: its problem `code` is the tag in snake case (D1). */
const CONTRACT_ERRORS = [
  Errors.ValidationFailed,
  Errors.VersionConflict,
  Errors.Unauthenticated,
  Errors.Forbidden,
  Errors.NotFound,
  Errors.PayloadTooLarge,
  Errors.MethodNotAllowed,
  Errors.UnsupportedMediaType,
  Errors.RateLimited,
  Errors.Unavailable,
  Errors.Internal,
  Errors.EventNotFound,
  Errors.RaiseRequestNotFound,
  Errors.RaiseRequestDecided,
  Errors.TooManyPendingRequests,
  Errors.LimitNotFound,
  InvalidCredentials,
  RepositoryNotFound,
  BudgetBelowCommitted,
  IdempotencyKeyReused,
  IdempotencyInProgress,
  LedgerEntryNotFound,
  SessionNotFound,
  GrantNotFound,
  GrantNotLive,
  MemberNotFound,
  WebhookNotFound,
  WebhookLimitReached,
  WebhookUrlRefused
] as const

/** `VersionConflict` -> `version_conflict`, as `problemCode` does at run time. */
type SnakeCase<S extends string, First extends boolean = true> = S extends `${infer C}${infer Rest}`
  ? `${C extends Lowercase<C> ? C : First extends true ? Lowercase<C> : `_${Lowercase<C>}`}${SnakeCase<Rest, false>}`
  : ""

/** A problem code the contract declares. */
export type ProblemCode = SnakeCase<InstanceType<typeof CONTRACT_ERRORS[number]>["_tag"]>

/** The problem codes the contract can answer: `validation_failed`, `version_conflict`, … */
export const PROBLEM_CODES: ReadonlyArray<ProblemCode> = CONTRACT_ERRORS.map((error) =>
  problemCode(error._tag) as ProblemCode
)

export interface FieldError {
  /** A JSON Pointer into the request: `#/budget_usd`, `#/query/limit`. */
  readonly pointer: string
  readonly detail: string
}

/** A problem document (RFC 9457) the service answered, or a network failure after the last attempt (status 0). */
export class AccountApiError extends Error {
  override readonly name = "AccountApiError"
  readonly status: number
  /** The stable code (`validation_failed`, `version_conflict`, …); `network_error` when no answer came. */
  readonly code: ProblemCode | "network_error" | (string & {})
  readonly detail: string
  /** A 422's field errors; empty otherwise. */
  readonly errors: ReadonlyArray<FieldError>
  /** A 409 version_conflict's current version. */
  readonly current_version: number | undefined
  /** A 409 budget_below_committed's lowest budget that can be set now. */
  readonly minimum_budget_usd: string | undefined
  /** A 409 grant_not_live's grant state: `used`, `expired` or `voided` (D21). */
  readonly state: GrantState | undefined
  /** A 429 or 503's wait before trying again. */
  readonly retry_after_seconds: number | undefined
  /** The whole problem document, for members not named here. */
  readonly body: Readonly<Record<string, unknown>>

  constructor(status: number, body: Readonly<Record<string, unknown>>) {
    const code = typeof body.code === "string" ? body.code : status === 0 ? "network_error" : `http_${status}`
    const detail = typeof body.detail === "string" ? body.detail : `HTTP ${status}`
    super(`${status} ${code}: ${detail}`)
    this.status = status
    this.code = code
    this.detail = detail
    this.errors = Array.isArray(body.errors) ? body.errors.filter(isFieldError) : []
    this.current_version = typeof body.current_version === "number" ? body.current_version : undefined
    this.minimum_budget_usd = typeof body.minimum_budget_usd === "string" ? body.minimum_budget_usd : undefined
    this.state = isGrantState(body.state) ? body.state : undefined
    this.retry_after_seconds = typeof body.retry_after_seconds === "number" ? body.retry_after_seconds : undefined
    this.body = body
  }
}

const isGrantState = Schema.is(GrantState)

const isFieldError = (value: unknown): value is FieldError =>
  typeof value === "object" && value !== null && "pointer" in value && typeof value.pointer === "string" &&
  "detail" in value && typeof value.detail === "string"

export interface RetryOptions {
  /** Attempts in all, the first included; 5 when omitted. */
  readonly attempts?: number
  /** The first wait after a network error, doubled each time; 200 ms when omitted. */
  readonly baseDelayMs?: number
  /** No wait (a Retry-After included) is longer; 30 s when omitted. */
  readonly maxDelayMs?: number
}

export interface AccountApiClientOptions {
  /** Where the service answers: `http://localhost:8080`. */
  readonly baseUrl: string
  /** A bearer token from `POST /auth/login`; `login()` sets it too. */
  readonly token?: string
  readonly retry?: RetryOptions
  /** An attempt with no answer (its status and headers) within this long is a network error; 30 s when omitted. */
  readonly timeoutMs?: number
}

type Json = Readonly<Record<string, unknown>>
type Endpoint = HttpApiEndpoint.HttpApiEndpoint.AnyWithProps

/** The contract's endpoints by `group.name`, whose method, path and success schema the calls use. */
const endpoints = new Map(
  Object.values(Api.groups).flatMap((group) =>
    Object.values(group.endpoints).map((
      endpoint
    ): [string, Endpoint] => [`${group.identifier}.${endpoint.name}`, endpoint])
  )
)

/** Statuses (and 409 codes) a request is sent again for, after Retry-After: the service asked to wait. */
const retryable = (status: number, code: string) =>
  status === 429 || status === 503 || (status === 409 && code === problemCode(IdempotencyInProgress._tag))

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * A version 4 UUID from Web Crypto's random bytes, which Node and every browser have, on any page
 * (`crypto.randomUUID` exists only in secure contexts): the client needs no Node module. What
 * `setBudget`, `addCredit` and `voidGrant` use when no key is given; a caller that lets a person retry an
 * action makes one with it when the action starts and passes it on every attempt (D6).
 */
export const newIdempotencyKey = (): string => {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16))
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

export type LedgerQuery = { readonly before?: string; readonly limit?: number }
export type SessionsQuery = {
  readonly state?: "open" | "closed" | "all"
  readonly before?: string
  readonly limit?: number
}
/**
 * A directory read (D23): `q` a substring of the name (case-insensitive, 1 to 100 characters),
 * `after` the previous page's `next_after`, `limit` 1 to 500.
 */
export type DirectoryQuery = { readonly q?: string; readonly after?: string; readonly limit?: number }
export type ExportQuery = { readonly from?: string; readonly to?: string }
/** `from` and `to`: dates (`2026-03-01`) or RFC 3339 date-times; the current UTC month when both are left out. */
export type SpendQuery = { readonly group_by: SpendGroupBy; readonly from?: string; readonly to?: string }
/** What a by-day report splits each day by: a grouping of the report other than time. */
export type SpendSplit = Exclude<SpendGroupBy, "day" | "month">
/** The window as `SpendQuery` takes it (the current UTC month when both are left out). */
export type SpendByDayQuery = { readonly split_by: SpendSplit; readonly from?: string; readonly to?: string }
/** One UTC day of a by-day report: the report's groups for that day alone (none on a day nothing was spent). */
export interface SpendDay {
  /** `2026-03-01`. */
  readonly day: string
  readonly groups: ReadonlyArray<typeof SpendGroup.Encoded>
}
/** Every day of the window, oldest first, each split by repository or user. */
export interface SpendByDay {
  readonly from: string
  readonly to: string
  readonly split_by: SpendSplit
  readonly days: ReadonlyArray<SpendDay>
}

type WithOptionalKey<T extends { readonly idempotency_key: string }> =
  & Omit<T, "idempotency_key">
  & { readonly idempotency_key?: string }

export type SetBudgetBody = WithOptionalKey<typeof SetBudgetRequest.Encoded>
/**
 * A credit is a grant (D21): `expires_at` an ISO 8601 time with its zone (after now, at most 5
 * years ahead; never expiring when omitted), `priority` 0–100 (50; lower is drawn first),
 * `category` `"paid"` (the default) or `"promotional"`.
 */
export type AddCreditBody = WithOptionalKey<typeof AddCreditRequest.Encoded>
/** `state`: `live` (the default) in draw-down order, `ended` (used, expired, voided) newest first, or `all`. */
export type GrantsQuery = typeof GrantsUrlParams.Encoded
export type VoidGrantBody = WithOptionalKey<typeof VoidGrantRequest.Encoded>
export type AccountPolicyBody = typeof AccountPolicyRequest.Encoded
export type RepositoryPolicyBody = typeof RepositoryPolicyRequest.Encoded
export type SpendLimitsBody = typeof ReplaceSpendLimitsRequest.Encoded
/**
 * A raise request (D22): `limit_id` a spend limit of the account, `amount_usd` above its amount,
 * `until` an RFC 3339 date-time in the future (at most 90 days ahead), `reason` 1 to 500 characters.
 */
export type RaiseRequestBody = typeof CreateRaiseRequest.Encoded
/** The account's zone and week start (D22); `expected_version` the version last read, 0 when omitted. */
export type SettingsBody = typeof ReplaceSettingsRequest.Encoded
/**
 * A session's attribution, for what would apply to it (D22): each optional; `labels` as
 * `key:value` pairs, comma-separated (`team:infra,env:prod`).
 */
export type EffectiveLimitsQuery = typeof EffectiveQuery.Encoded
/** `state`: `pending` (the default), `decided` (approved or declined) or `all`. */
export type RaiseRequestsQuery = { readonly state?: RaiseRequestFilter }
/** Either left out means what was asked; each at most what was asked. */
export type ApproveRaiseBody = typeof ApproveRaiseRequest.Encoded
export type DeclineRaiseBody = typeof DeclineRaiseRequest.Encoded
export type AlertsBody = typeof AlertsRequest.Encoded
export type CreateWebhookBody = typeof CreateWebhookRequest.Encoded
export type UpdateWebhookBody = typeof UpdateWebhookRequest.Encoded
/** `limit`: the newest attempts to list, 1 to 500. */
export type WebhookDeliveriesQuery = { readonly limit?: number }
/**
 * Oldest first (the default `order`): `after` an event id of the account (the previous page's
 * `next_after`), `limit` 1 to 500, `type` one type of the catalog.
 */
export type EventPagesQuery = {
  readonly order?: Extract<EventOrder, "oldest">
  readonly after?: string
  readonly limit?: number
  readonly type?: EventType
}
/** The newest `limit` events (of `type`), newest first, in one page: no `after`, `next_after` null. */
export type NewestEventsQuery = {
  readonly order: Extract<EventOrder, "newest">
  readonly limit?: number
  readonly type?: EventType
}
export type EventsQuery = EventPagesQuery | NewestEventsQuery
export type PollOptions = EventPagesQuery & {
  /** The wait between polls once the log has nothing newer; 5 s when omitted. */
  readonly intervalMs?: number
  /** Aborting it ends the iteration (cleanly, no error). */
  readonly signal?: AbortSignal
}

interface Call {
  readonly endpoint: string
  readonly path?: Readonly<Record<string, string>>
  readonly query?: Readonly<Record<string, string | number | undefined>>
  readonly body?: unknown
}

/**
 * The Account API over HTTP. Writes carry an idempotency key (a fresh UUID unless given), the same
 * on every retry, so a retried write is applied once (D6). Network errors, 429, 503 and
 * 409 idempotency_in_progress are retried after Retry-After; any other error is thrown at once
 * as an `AccountApiError`.
 */
export class AccountApiClient {
  readonly #baseUrl: string
  readonly #attempts: number
  readonly #baseDelayMs: number
  readonly #maxDelayMs: number
  readonly #timeoutMs: number
  #token: string | undefined

  constructor(options: AccountApiClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "")
    this.#token = options.token
    this.#attempts = Math.max(1, options.retry?.attempts ?? 5)
    this.#baseDelayMs = options.retry?.baseDelayMs ?? 200
    this.#maxDelayMs = options.retry?.maxDelayMs ?? 30_000
    this.#timeoutMs = options.timeoutMs ?? 30_000
  }

  /** The bearer token calls send; undefined until set or signed in. */
  get token(): string | undefined {
    return this.#token
  }

  set token(token: string | undefined) {
    this.#token = token
  }

  /** Sends the request until it is answered for good, then returns the response (2xx) or throws its problem. */
  async #send(call: Call, accept = "application/json"): Promise<Response> {
    const endpoint = endpoints.get(call.endpoint)
    if (endpoint === undefined) throw new Error(`the contract has no endpoint ${call.endpoint}`)
    const path = endpoint.path.replace(
      /:([A-Za-z_]+)/g,
      (_, name: string) => encodeURIComponent(call.path?.[name] ?? "")
    )
    const query = new URLSearchParams(
      Object.entries(call.query ?? {}).flatMap(([name, value]): Array<[string, string]> =>
        value === undefined ? [] : [[name, String(value)]]
      )
    ).toString()
    const url = `${this.#baseUrl}${path}${query === "" ? "" : `?${query}`}`
    const headers: Record<string, string> = { accept }
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`
    if (call.body !== undefined) headers["content-type"] = "application/json"
    const body = call.body === undefined ? undefined : JSON.stringify(call.body)
    for (let attempt = 1;; attempt++) {
      const backoff = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (attempt - 1))
      let response: Response
      // Bounds the wait for the answer's head, not its body: an export streams as long as it takes.
      const abort = new AbortController()
      const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.#timeoutMs} ms`)), this.#timeoutMs)
      try {
        response = await fetch(url, {
          method: endpoint.method,
          headers,
          signal: abort.signal,
          ...(body === undefined ? {} : { body })
        })
      } catch (error) {
        // No answer: the request may or may not have been applied; the same key makes a retry safe.
        if (attempt >= this.#attempts) {
          throw new AccountApiError(0, {
            detail: error instanceof Error ? String(error.cause ?? error.message) : String(error)
          })
        }
        await sleep(backoff)
        continue
      } finally {
        clearTimeout(timer)
      }
      if (response.ok) return response
      const text = await response.text()
      const problem = new AccountApiError(response.status, parseObject(text))
      if (!retryable(problem.status, problem.code) || attempt >= this.#attempts) throw problem
      const after = Number(response.headers.get("retry-after"))
      await sleep(Number.isInteger(after) && after > 0 ? Math.min(this.#maxDelayMs, after * 1000) : backoff)
    }
  }

  /** A JSON answer, checked against the endpoint's success schema: a drift from the contract is an error, not a surprise later. */
  async #json<A>(call: Call): Promise<A> {
    const response = await this.#send(call)
    const body: unknown = response.status === 204 ? undefined : await response.json()
    const endpoint = endpoints.get(call.endpoint)
    if (endpoint !== undefined && response.status !== 204) {
      const checked = Schema.decodeUnknownEither(endpoint.successSchema as Schema.Schema<unknown, unknown>)(body)
      if (Either.isLeft(checked)) {
        throw new Error(`the answer of ${call.endpoint} does not match the contract: ${checked.left.message}`)
      }
    }
    return body as A
  }

  // Operations

  healthz(): Promise<{ readonly status: "ok" }> {
    return this.#json({ endpoint: "operations.healthz" })
  }

  readyz(): Promise<{ readonly status: "ready"; readonly checks: { postgres: "ok" | "down"; redis: "ok" | "down" } }> {
    return this.#json({ endpoint: "operations.readyz" })
  }

  /** Prometheus text exposition. */
  async metrics(): Promise<string> {
    return (await this.#send({ endpoint: "operations.metrics" }, "text/plain")).text()
  }

  // Sign-in (D2)

  /** Signs in and keeps the token for the calls that follow. */
  async login(email: string, password: string): Promise<typeof LoginResponse.Encoded> {
    const body: typeof LoginRequest.Encoded = { email, password }
    const answer = await this.#json<typeof LoginResponse.Encoded>({ endpoint: "auth.login", body })
    this.#token = answer.access_token
    return answer
  }

  me(): Promise<typeof MeResponse.Encoded> {
    return this.#json({ endpoint: "auth.me" })
  }

  /** Revokes this token's sign-in session and forgets the token. */
  async logout(): Promise<void> {
    await this.#send({ endpoint: "auth.logout" })
    this.#token = undefined
  }

  // Autonomy policy (D4, D5)

  getCapabilities(): Promise<typeof Capabilities.Encoded> {
    return this.#json({ endpoint: "policies.getCapabilities" })
  }

  getAccountPolicy(): Promise<typeof AccountPolicyRecord.Encoded> {
    return this.#json({ endpoint: "policies.getAccountPolicy" })
  }

  replaceAccountPolicy(body: AccountPolicyBody): Promise<typeof AccountPolicyRecord.Encoded> {
    return this.#json({ endpoint: "policies.replaceAccountPolicy", body })
  }

  getRepositoryPolicy(repository_id: string): Promise<typeof RepositoryPolicyRecord.Encoded> {
    return this.#json({ endpoint: "policies.getRepositoryPolicy", path: { repository_id } })
  }

  replaceRepositoryPolicy(
    repository_id: string,
    body: RepositoryPolicyBody
  ): Promise<typeof RepositoryPolicyRecord.Encoded> {
    return this.#json({ endpoint: "policies.replaceRepositoryPolicy", path: { repository_id }, body })
  }

  // Wallet, grants and ledger (D6, D7, D13, D21)

  /** The wallet, with `next_expiry`: the soonest live grant to expire and what is free of it, null when none (D21). */
  getWallet(): Promise<typeof WalletRead.Encoded> {
    return this.#json({ endpoint: "wallets.getWallet" })
  }

  /** Sets the total budget; a fresh idempotency key unless one is given, kept across retries. */
  setBudget(body: SetBudgetBody): Promise<typeof Wallet.Encoded> {
    return this.#json({
      endpoint: "wallets.setBudget",
      body: { ...body, idempotency_key: body.idempotency_key ?? newIdempotencyKey() }
    })
  }

  /**
   * Adds credit as a grant (administrators; D21), answering the wallet with the `grant` it made; a
   * fresh idempotency key unless one is given, kept across retries.
   */
  addCredit(body: AddCreditBody): Promise<typeof CreditAdded.Encoded> {
    return this.#json({
      endpoint: "wallets.addCredit",
      body: { ...body, idempotency_key: body.idempotency_key ?? newIdempotencyKey() }
    })
  }

  /** The wallet's grants (D21): live ones in draw-down order unless `state` says `ended` or `all`. */
  listGrants(query: GrantsQuery = {}): Promise<typeof GrantList.Encoded> {
    return this.#json({ endpoint: "wallets.listGrants", query })
  }

  /**
   * Ends a live grant at once (administrators; D21), answering the grant: 404 `grant_not_found`,
   * 409 `grant_not_live` (with its `state`). A fresh idempotency key unless one is given, kept
   * across retries.
   */
  voidGrant(id: string, body: VoidGrantBody = {}): Promise<typeof Grant.Encoded> {
    return this.#json({
      endpoint: "wallets.voidGrant",
      path: { id },
      body: { ...body, idempotency_key: body.idempotency_key ?? newIdempotencyKey() }
    })
  }

  /** One page of ledger entries, newest first. */
  listLedger(query: LedgerQuery = {}): Promise<typeof LedgerPage.Encoded> {
    return this.#json({ endpoint: "wallets.listLedger", query })
  }

  /** Every page of the ledger from `query.before` (or the newest) back: `for await (const page of client.ledgerPages())`. */
  async *ledgerPages(query: LedgerQuery = {}): AsyncGenerator<typeof LedgerPage.Encoded> {
    for (let before = query.before;;) {
      const page = await this.listLedger({ ...query, ...(before === undefined ? {} : { before }) })
      yield page
      if (page.next_before === null) return
      before = page.next_before
    }
  }

  /**
   * The wallet's balances at a past time (D19): those after the last entry at or before `time`, an
   * ISO 8601 time with its zone (`2026-03-01T00:00:00Z`) not later than now, with that entry's id
   * and sequence (null and 0 before the first entry).
   */
  walletAsOf(time: string): Promise<typeof WalletAsOf.Encoded> {
    return this.#json({ endpoint: "wallets.getWalletAsOf", query: { time } })
  }

  /** The wallet's ledger as CSV (RFC 4180), oldest first, as it streams in: `for await (const chunk of …)`. */
  async *exportLedger(query: ExportQuery = {}): AsyncGenerator<string> {
    const response = await this.#send({ endpoint: "wallets.exportLedger", query }, "text/csv")
    if (response.body === null) return
    const decoder = new TextDecoder()
    for await (const chunk of response.body) {
      const text = decoder.decode(chunk, { stream: true })
      if (text !== "") yield text
    }
    const rest = decoder.decode()
    if (rest !== "") yield rest
  }

  // The account's directory (D23)

  /** The account's repositories by name then id, each with whether it has a policy override. */
  listRepositories(query: DirectoryQuery = {}): Promise<typeof RepositoryPage.Encoded> {
    return this.#json({ endpoint: "directory.listRepositories", query })
  }

  /** The account's members by name then id (a personal account: its user); `email` only for an administrator. */
  listMembers(query: DirectoryQuery = {}): Promise<typeof MemberPage.Encoded> {
    return this.#json({ endpoint: "directory.listMembers", query })
  }

  // Settlement sessions (D12)

  listSessions(query: SessionsQuery = {}): Promise<typeof WalletSessionPage.Encoded> {
    return this.#json({ endpoint: "sessions.listSessions", query })
  }

  /** Every page of sessions from `query.before` (or the newest) back. */
  async *sessionPages(query: SessionsQuery = {}): AsyncGenerator<typeof WalletSessionPage.Encoded> {
    for (let before = query.before;;) {
      const page = await this.listSessions({ ...query, ...(before === undefined ? {} : { before }) })
      yield page
      if (page.next_before === null) return
      before = page.next_before
    }
  }

  getSession(session_id: string): Promise<typeof WalletSessionDetail.Encoded> {
    return this.#json({ endpoint: "sessions.getSession", path: { session_id } })
  }

  // The account's settings (D22)

  /** The account's time zone and week start: UTC and monday, version 0, until an administrator saves them. */
  getSettings(): Promise<typeof AccountSettings.Encoded> {
    return this.#json({ endpoint: "settings.getSettings" })
  }

  /**
   * Saves the zone and week start (administrators): 422 at `#/timezone` for a zone the service
   * does not know, 409 `version_conflict` for a stale version. A change applies from each
   * period's next boundary.
   */
  replaceSettings(body: SettingsBody): Promise<typeof AccountSettings.Encoded> {
    return this.#json({ endpoint: "settings.replaceSettings", body })
  }

  // Spend controls (D16)

  /**
   * What would apply to a new session of this attribution now (D22): its limits with what each
   * leaves, the wallet's funds, and `max_reservable_usd`, the largest reserve it could take.
   */
  getEffectiveLimits(query: EffectiveLimitsQuery = {}): Promise<typeof EffectiveLimits.Encoded> {
    return this.#json({ endpoint: "effectiveLimits.getEffectiveLimits", query })
  }

  /** The account's limits, each with what it has used in its current period. */
  getLimits(): Promise<typeof SpendLimits.Encoded> {
    return this.#json({ endpoint: "spend.getLimits" })
  }

  /** Replaces the whole list (administrators); `expected_version` is the version last read, 0 when omitted. */
  replaceLimits(body: SpendLimitsBody): Promise<typeof SpendLimits.Encoded> {
    return this.#json({ endpoint: "spend.replaceLimits", body })
  }

  /**
   * Asks for a temporary raise of a spend limit (any member; D22), answering the pending request:
   * 422 at the field, 409 `too_many_pending_requests` beyond 20 pending for the account.
   */
  requestLimitRaise(body: RaiseRequestBody): Promise<typeof PendingRaiseRequest.Encoded> {
    return this.#json({ endpoint: "spend.createRaiseRequest", body })
  }

  /** Raise requests newest first: the account's for an administrator, a member's own otherwise; pending by default. */
  listRaiseRequests(query: RaiseRequestsQuery = {}): Promise<typeof RaiseRequestList.Encoded> {
    return this.#json({ endpoint: "spend.listRaiseRequests", query })
  }

  /**
   * Approves a raise request (administrators), setting the limit's raise as a PUT would: 404
   * `raise_request_not_found`, 409 `raise_request_decided` (with `state`), 409 `limit_not_found`.
   */
  approveRaiseRequest(id: string, body: ApproveRaiseBody = {}): Promise<typeof ApprovedRaiseRequest.Encoded> {
    return this.#json({ endpoint: "spend.approveRaiseRequest", path: { id }, body })
  }

  /** Declines a raise request (administrators), with an optional reason: 404, 409 `raise_request_decided`. */
  declineRaiseRequest(id: string, body: DeclineRaiseBody = {}): Promise<typeof DeclinedRaiseRequest.Encoded> {
    return this.#json({ endpoint: "spend.declineRaiseRequest", path: { id }, body })
  }

  /** What the account's sessions spent, grouped by repository, user, day or month. */
  getSpend(query: SpendQuery): Promise<typeof SpendReport.Encoded> {
    return this.#json({ endpoint: "spend.getSpend", query })
  }

  /**
   * The spend of each day of the window split by repository or user, as a stacked chart by day
   * draws it. The report groups by one thing at a time, so this reads it by day first, then each
   * day that spent something by `split_by` (one request per such day). For every group, its days
   * add up to what one report of the whole window says for it.
   */
  async getSpendByDay(query: SpendByDayQuery): Promise<SpendByDay> {
    const { split_by, ...window } = query
    const byDay = await this.getSpend({ ...window, group_by: "day" })
    const spentDays = byDay.groups.flatMap((group) => group.key ?? [])
    const split = new Map(
      await Promise.all(spentDays.map(async (day) => {
        const report = await this.getSpend({ group_by: split_by, from: day, to: nextDay(day) })
        return [day, report.groups] as const
      }))
    )
    const days: Array<SpendDay> = []
    const end = DateTime.unsafeMake(byDay.to)
    for (let day = DateTime.unsafeMake(byDay.from); DateTime.lessThan(day, end); day = DateTime.add(day, { days: 1 })) {
      const date = DateTime.formatIsoDate(day)
      days.push({ day: date, groups: split.get(date) ?? [] })
    }
    return { from: byDay.from, to: byDay.to, split_by, days }
  }

  // Events, alerts and the live stream (D17)

  /** The alert thresholds: version 0, none and `updated_at` null until saved. */
  getAlerts(): Promise<typeof AlertsRecord.Encoded> {
    return this.#json({ endpoint: "events.getAlerts" })
  }

  /** Replaces the thresholds (administrators); `expected_version` is the version last read, 0 when omitted. */
  replaceAlerts(body: AlertsBody): Promise<typeof AlertsRecord.Encoded> {
    return this.#json({ endpoint: "events.replaceAlerts", body })
  }

  /**
   * One page of events, oldest first, after `query.after` (from the oldest kept without it); or,
   * with `order: "newest"`, the newest `limit` events, newest first.
   */
  listEvents(query: EventsQuery = {}): Promise<AccountEventPage> {
    return this.#json({ endpoint: "events.listEvents", query })
  }

  /** Every page from `query.after` (or the oldest kept event) to the newest, following `next_after`. */
  async *eventPages(query: EventPagesQuery = {}): AsyncGenerator<AccountEventPage> {
    for (let after = query.after;;) {
      const page = await this.listEvents({ ...query, ...(after === undefined ? {} : { after }) })
      yield page
      if (page.next_after === null) return
      after = page.next_after
    }
  }

  // Webhook endpoints and their deliveries (D17): administrators only

  /** Registers an endpoint; the answer holds its secret, which no later read shows. */
  createWebhook(body: CreateWebhookBody): Promise<typeof WebhookEndpointWithSecret.Encoded> {
    return this.#json({ endpoint: "webhooks.createWebhook", body })
  }

  listWebhooks(): Promise<typeof WebhookEndpointList.Encoded> {
    return this.#json({ endpoint: "webhooks.listWebhooks" })
  }

  getWebhook(id: string): Promise<typeof WebhookEndpoint.Encoded> {
    return this.#json({ endpoint: "webhooks.getWebhook", path: { id } })
  }

  /** Changes url, types, description or `enabled` (enabling clears `disabled_reason`). */
  updateWebhook(id: string, body: UpdateWebhookBody): Promise<typeof WebhookEndpoint.Encoded> {
    return this.#json({ endpoint: "webhooks.updateWebhook", path: { id }, body })
  }

  async deleteWebhook(id: string): Promise<void> {
    await this.#send({ endpoint: "webhooks.deleteWebhook", path: { id } })
  }

  /** A new secret, shown only in this answer; the previous one keeps signing beside it for a while. */
  rotateWebhookSecret(id: string): Promise<typeof RotatedSecret.Encoded> {
    return this.#json({ endpoint: "webhooks.rotateWebhookSecret", path: { id } })
  }

  /** The endpoint's delivery attempts, newest first. */
  listWebhookDeliveries(id: string, query: WebhookDeliveriesQuery = {}): Promise<typeof WebhookDeliveryList.Encoded> {
    return this.#json({ endpoint: "webhooks.listWebhookDeliveries", path: { id }, query })
  }

  /** Queues the event again to every enabled endpoint whose types match. */
  redeliverEvent(event_id: string): Promise<typeof Redelivery.Encoded> {
    return this.#json({ endpoint: "webhooks.redeliverEvent", path: { id: event_id } })
  }

  /**
   * Every event from `options.after` on, oldest first, each once, and then each new one as a poll
   * finds it (every `intervalMs` once caught up), until `signal` aborts: a poller that keeps the
   * id of the last event it handled resumes with it as `after`. A pruned or unknown `after`
   * throws 404 `event_not_found`.
   */
  async *pollEvents(options: PollOptions = {}): AsyncGenerator<AccountEvent> {
    const { intervalMs = 5_000, signal, ...query } = options
    let after = query.after
    // A function, not the property: the signal aborts while this awaits.
    const stopped = () => signal?.aborted === true
    while (!stopped()) {
      const page = await this.listEvents({ ...query, ...(after === undefined ? {} : { after }) })
      for (const event of page.events) {
        after = event.id
        yield event
        if (stopped()) return
      }
      if (page.next_after === null) await pause(intervalMs, signal)
    }
  }

  /**
   * The live stream (`GET /developer/account/events/stream`, server-sent events read with
   * `fetch`), as an async iterator of events checked against the catalog. A dropped connection
   * is opened again with `Last-Event-ID`, so every event comes once, in the log's order; a
   * refusal that asking again will not change (401, 403, 404 `event_not_found` for a pruned
   * `lastEventId`) throws an `AccountApiError`. Abort `signal`, or leave the loop, to stop.
   */
  streamEvents(options: StreamOptions = {}): AsyncGenerator<AccountEvent> {
    const endpoint = endpoints.get("events.streamEvents")
    if (endpoint === undefined) throw new Error("the contract has no endpoint events.streamEvents")
    return readStream({
      url: `${this.#baseUrl}${endpoint.path}${options.onWalletChanged === undefined ? "" : "?notices=wallet"}`,
      // Read at each connection: a token set meanwhile (signed in again) is the one sent.
      headers: (): Record<string, string> =>
        this.#token === undefined ? {} : { authorization: `Bearer ${this.#token}` },
      refused: ({ status, text }) => {
        const problem = new AccountApiError(status, parseObject(text))
        if (!retryable(status, problem.code) && status < 500) throw problem
      },
      baseDelayMs: this.#baseDelayMs,
      maxDelayMs: this.#maxDelayMs
    }, options)
  }
}

/** `2026-03-01` -> `2026-03-02`, in UTC. */
const nextDay = (date: string): string =>
  DateTime.formatIsoDate(DateTime.add(DateTime.unsafeMake(`${date}T00:00:00Z`), { days: 1 }))

const parseObject = (text: string): Json => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Json : { detail: text }
  } catch {
    return { detail: text }
  }
}
