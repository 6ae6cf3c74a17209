import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { Forbidden, RateLimited, Unavailable, VersionConflict } from "../Domain/Errors.js"
import { Grant, GrantCategory, GrantList, GrantNotFound, GrantNotLive, GrantPriority } from "../Domain/Grants.js"
import { PositiveUsdAmount, UsdAmount } from "../Domain/Money.js"
import { Limit } from "../Domain/Paging.js"
import { problem } from "../Domain/Problem.js"
import { RequestBody } from "../Domain/Strict.js"
import { Instant } from "../Domain/Time.js"
import { ExpectedVersion } from "../Domain/Version.js"
import {
  BudgetBelowCommitted,
  CreditAdded,
  IdempotencyInProgress,
  IdempotencyKey,
  IdempotencyKeyReused,
  LEDGER_CSV_COLUMNS,
  LedgerEntryNotFound,
  LedgerPage,
  Note,
  Wallet,
  WalletAsOf,
  WalletRead
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

/**
 * Adds to the current budget (seed §4.11) as a grant (D21); administrators only. Whether
 * `expires_at` is after now and at most 5 years ahead is the service's check (it needs the clock).
 */
export const AddCreditRequest = RequestBody("AddCreditRequest", {
  amount_usd: PositiveUsdAmount,
  idempotency_key: IdempotencyKey,
  note: Schema.optionalWith(Note, { exact: true }),
  expires_at: Schema.optionalWith(
    Instant({
      description: "When the grant expires: an ISO 8601 time with its zone (Z or an offset), after now, at most " +
        "5 years ahead. Omitted: it never expires.",
      message: "must be an ISO 8601 time with its zone (Z or an offset), such as 2026-12-31T23:59:59Z"
    }),
    { exact: true }
  ),
  priority: Schema.optionalWith(GrantPriority, { exact: true }),
  category: Schema.optionalWith(GrantCategory, { exact: true })
})

export const GrantsQuery = Schema.Struct({
  state: Schema.optionalWith(
    Schema.Literal("live", "ended", "all").annotations({
      message: () => ({ message: "must be \"live\", \"ended\" or \"all\"", override: true })
    }),
    { exact: true }
  )
})

/** Ends a live grant at once (D21); administrators only. */
export const VoidGrantRequest = RequestBody("VoidGrantRequest", {
  idempotency_key: IdempotencyKey,
  note: Schema.optionalWith(Note, { exact: true })
})

export const GrantPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The grant's id." })
})

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

/**
 * A time in a query: an RFC 3339 date-time with its zone, naming a moment that exists, in the
 * years PostgreSQL's timestamps hold (`src/Domain/Time.ts`, the one reading of every time a
 * client sends; a year 0000 once reached the database and ended the export after its header).
 */
const instant = (description: string) =>
  Instant({
    description,
    message: "must be an ISO 8601 time between the years 0001 and 9999, such as 2026-01-31T00:00:00Z"
  })

export const LedgerExportQuery = Schema.Struct({
  from: Schema.optionalWith(instant("Entries created at or after this time."), { exact: true }),
  to: Schema.optionalWith(instant("Entries created before this time."), { exact: true })
})

/** D19: a time with its zone; one without is refused, since whose midnight it meant is unknown. */
export const WalletAsOfQuery = Schema.Struct({
  time: instant(
    "The time to read the balances at: an ISO 8601 time with its zone (Z or an offset), not later than now; " +
      "read to the millisecond."
  )
})

export class WalletsApi extends HttpApiGroup.make("wallets")
  .add(
    HttpApiEndpoint.get("getWallet", "/developer/account/wallet")
      .annotate(OpenApi.Summary, "The wallet")
      .addSuccess(WalletRead)
      .annotate(
        OpenApi.Description,
        "The account's wallet; created on first read with version 0 and zeros. next_expiry is the soonest live " +
          "grant to expire (D21), null when none; a grant past its expires_at is never counted in budget_usd or " +
          "available_usd, even before its credit_expired entry is written."
      )
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
      .addSuccess(CreditAdded)
      .addError(problem(Forbidden))
      .addError(problem(IdempotencyInProgress))
      .addError(problem(IdempotencyKeyReused))
      .addError(problem(Unavailable))
      .annotate(
        OpenApi.Description,
        "Adds credit to the budget as a grant (administrators only; D21): optional expires_at, priority (0 to 100, " +
          "default 50, lower drawn first) and category (paid, the default, or promotional). Answers the wallet " +
          "with the grant. A retry with the same idempotency_key replays the first success (header " +
          "Idempotent-Replayed: true)."
      )
  )
  .add(
    HttpApiEndpoint.get("listGrants", "/developer/account/wallet/grants")
      .annotate(OpenApi.Summary, "Credit grants")
      .setUrlParams(GrantsQuery)
      .addSuccess(GrantList)
      .annotate(
        OpenApi.Description,
        "The wallet's grants (D21): state=live (the default) in draw-down order (priority, then the soonest " +
          "expiry, never-expiring last, then promotional before paid, then creation), ended (used, expired, " +
          "voided) newest first, or all (live ones, then ended ones). amount = drawn + held + free + ended."
      )
  )
  .add(
    HttpApiEndpoint.post("voidGrant", "/developer/account/wallet/grants/:id/void")
      .annotate(OpenApi.Summary, "Void a grant")
      .setPath(GrantPath)
      .setPayload(VoidGrantRequest)
      .addSuccess(Grant)
      .addError(problem(Forbidden))
      .addError(problem(GrantNotFound))
      .addError(problem(GrantNotLive))
      .addError(problem(IdempotencyInProgress))
      .addError(problem(IdempotencyKeyReused))
      .addError(problem(Unavailable))
      .annotate(
        OpenApi.Description,
        "Ends a live grant at once (administrators only; D21): its free amount leaves the budget with a " +
          "credit_voided entry and a grant.voided event; what open holds earmarked on it stays theirs until " +
          "they release it. Answers the grant. 404 grant_not_found, 409 grant_not_live. A retry with the same " +
          "idempotency_key replays the first success."
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
    HttpApiEndpoint.get("getWalletAsOf", "/developer/account/wallet/as-of")
      .annotate(OpenApi.Summary, "The balances at a past time")
      .setUrlParams(WalletAsOfQuery)
      .addSuccess(WalletAsOf)
      .annotate(
        OpenApi.Description,
        "The wallet's balances as of time: those after the last ledger entry created at or before it, to the " +
          "millisecond (the latest created_at, ties by the greatest sequence), with that entry's id and sequence; " +
          "zeros, a null entry_id and sequence 0 before the wallet's first entry. A time later than now is 422. " +
          "One index probe, whatever the ledger's length."
      )
  )
  .add(
    HttpApiEndpoint.get("exportLedger", "/developer/account/wallet/ledger.csv")
      .annotate(OpenApi.Summary, "Export the ledger as CSV")
      .setUrlParams(LedgerExportQuery)
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/csv" })))
      .addError(problem(RateLimited))
      .annotate(
        OpenApi.Description,
        `Every entry of the wallet, oldest first, as RFC 4180 CSV (header ${LEDGER_CSV_COLUMNS.join(",")}), ` +
          "streamed whatever its size. from is inclusive, to exclusive. A cell that begins with =, +, -, @, " +
          "a tab or a carriage return is prefixed with ' so that spreadsheets do not run it. At most 2 exports " +
          "per account run at once (429 rate_limited with Retry-After past that); an export whose reader takes " +
          "nothing for the stall limit (30 s by default), or that fails after its header, is cut off: its body " +
          "then ends without the last chunk, never as a complete CSV."
      )
  )
  .middleware(Authentication)
{}
