import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Api.js"
import { Forbidden, Unavailable, VersionConflict } from "../Domain/Errors.js"
import { PositiveUsdAmount, UsdAmount } from "../Domain/Money.js"
import { problem } from "../Domain/Problem.js"
import { RequestBody } from "../Domain/Strict.js"
import { ExpectedVersion } from "../Domain/Version.js"
import {
  BudgetBelowCommitted,
  IdempotencyInProgress,
  IdempotencyKey,
  IdempotencyKeyReused,
  LEDGER_CSV_COLUMNS,
  LedgerEntryNotFound,
  LedgerPage,
  Note,
  SessionNotFound,
  Wallet,
  WalletSessionDetail,
  WalletSessionPage
} from "../Domain/Wallet.js"

// Optional fields are `exact` (absent or valid), so a bad value is reported
// once, not a second time as "not undefined".

/** Sets the total budget, not a delta (seed §4.10). */
export const SetBudgetRequest = RequestBody("SetBudgetRequest", {
  budget_usd: UsdAmount,
  idempotency_key: IdempotencyKey,
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true }),
  note: Schema.optionalWith(Note, { exact: true })
})

/** Adds to the current budget (seed §4.11); administrators only. */
export const AddCreditRequest = RequestBody("AddCreditRequest", {
  amount_usd: PositiveUsdAmount,
  idempotency_key: IdempotencyKey,
  note: Schema.optionalWith(Note, { exact: true })
})

/** A page's size: 1 to 500, 100 when omitted (D7, D12). */
const Limit = (what: string) =>
  Schema.optionalWith(
    Schema.String.pipe(
      Schema.pattern(/^[0-9]{1,3}$/, { description: `How many ${what}, 1 to 500; 100 when omitted.` }),
      Schema.compose(Schema.NumberFromString),
      Schema.int(),
      Schema.between(1, 500)
    ).annotations({ message: () => ({ message: "must be an integer from 1 to 500", override: true }) }),
    { exact: true }
  )

export const LedgerQuery = Schema.Struct({
  before: Schema.optionalWith(
    Schema.UUID.annotations({
      description: "Returns the entries older than this entry; pass the previous page's next_before.",
      message: () => ({ message: "must be the id of a ledger entry (a UUID)", override: true })
    }),
    { exact: true }
  ),
  limit: Limit("entries")
})

export const SessionsQuery = Schema.Struct({
  state: Schema.optionalWith(
    Schema.Literal("open", "closed", "all").annotations({
      description: "Which sessions: open (holding or able to spend), closed, or all; open when omitted.",
      message: () => ({ message: "must be open, closed or all", override: true })
    }),
    { exact: true }
  ),
  before: Schema.optionalWith(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)).annotations({
      description: "Returns the sessions opened before this one; pass the previous page's next_before.",
      message: () => ({ message: "must be a session id (1 to 255 characters)", override: true })
    }),
    { exact: true }
  ),
  limit: Limit("sessions")
})

/** Path parameters stay plain strings; the service decides what is unknown. */
const SessionPath = Schema.Struct({ session_id: Schema.String })

/** An ISO 8601 time, for the export's bounds. */
const Instant = Schema.DateTimeUtc.annotations({
  message: () => ({ message: "must be an ISO 8601 time, such as 2026-01-31T00:00:00Z", override: true })
})

export const LedgerExportQuery = Schema.Struct({
  from: Schema.optionalWith(Instant.annotations({ description: "Entries created at or after this time." }), {
    exact: true
  }),
  to: Schema.optionalWith(Instant.annotations({ description: "Entries created before this time." }), { exact: true })
})

export class WalletsApi extends HttpApiGroup.make("wallets")
  .add(
    HttpApiEndpoint.get("getWallet", "/developer/account/wallet")
      .annotate(OpenApi.Summary, "The wallet")
      .addSuccess(Wallet)
      .annotate(OpenApi.Description, "The account's wallet; created on first read with version 0 and zeros.")
  )
  .add(
    HttpApiEndpoint.put("setBudget", "/developer/account/wallet")
      .annotate(OpenApi.Summary, "Set the total budget")
      .setPayload(SetBudgetRequest)
      .addSuccess(Wallet)
      .addError(problem(VersionConflict))
      .addError(problem(BudgetBelowCommitted))
      .addError(problem(IdempotencyInProgress))
      .addError(problem(IdempotencyKeyReused))
      .addError(problem(Unavailable))
      .annotate(
        OpenApi.Description,
        "Sets the total budget. A retry with the same idempotency_key replays the first success " +
          "(header Idempotent-Replayed: true)."
      )
  )
  .add(
    HttpApiEndpoint.post("addCredit", "/developer/account/wallet/credits")
      .annotate(OpenApi.Summary, "Add credit")
      .setPayload(AddCreditRequest)
      .addSuccess(Wallet)
      .addError(problem(Forbidden))
      .addError(problem(IdempotencyInProgress))
      .addError(problem(IdempotencyKeyReused))
      .addError(problem(Unavailable))
      .annotate(
        OpenApi.Description,
        "Adds credit to the budget (administrators only). A retry with the same idempotency_key replays " +
          "the first success (header Idempotent-Replayed: true)."
      )
  )
  .add(
    HttpApiEndpoint.get("listLedger", "/developer/account/wallet/ledger")
      .annotate(OpenApi.Summary, "Ledger entries")
      .setUrlParams(LedgerQuery)
      .addSuccess(LedgerPage)
      .addError(problem(LedgerEntryNotFound))
      .annotate(OpenApi.Description, "Ledger entries, newest first; pass next_before as before for older ones.")
  )
  .add(
    HttpApiEndpoint.get("exportLedger", "/developer/account/wallet/ledger.csv")
      .annotate(OpenApi.Summary, "Export the ledger as CSV")
      .setUrlParams(LedgerExportQuery)
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/csv" })))
      .annotate(
        OpenApi.Description,
        `Every entry of the wallet, oldest first, as RFC 4180 CSV (header ${LEDGER_CSV_COLUMNS.join(",")}), ` +
          "streamed whatever its size. from is inclusive, to exclusive. A cell that begins with =, +, - or @ " +
          "is prefixed with ' so that spreadsheets do not run it."
      )
  )
  .add(
    HttpApiEndpoint.get("listSessions", "/developer/account/wallet/sessions")
      .annotate(OpenApi.Summary, "Sessions")
      .setUrlParams(SessionsQuery)
      .addSuccess(WalletSessionPage)
      .addError(problem(SessionNotFound))
      .annotate(
        OpenApi.Description,
        "The account's settlement sessions, newest first: what each holds, spent and was charged beyond its holds, " +
          "and when its hold lapses. Pass next_before as before for older ones."
      )
  )
  .add(
    HttpApiEndpoint.get("getSession", "/developer/account/wallet/sessions/:session_id")
      .annotate(OpenApi.Summary, "A session")
      .setPath(SessionPath)
      .addSuccess(WalletSessionDetail)
      .addError(problem(SessionNotFound))
      .annotate(OpenApi.Description, "The session and its ledger entries, oldest first (at most 1,000).")
  )
  .middleware(Authentication)
{}
