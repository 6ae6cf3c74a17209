import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
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
  LedgerEntryNotFound,
  LedgerPage,
  Note,
  Wallet
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

export const LedgerQuery = Schema.Struct({
  before: Schema.optionalWith(
    Schema.UUID.annotations({
      description: "Returns the entries older than this entry; pass the previous page's next_before.",
      message: () => ({ message: "must be the id of a ledger entry (a UUID)", override: true })
    }),
    { exact: true }
  ),
  limit: Schema.optionalWith(
    Schema.String.pipe(
      Schema.pattern(/^[0-9]{1,3}$/, { description: "How many entries, 1 to 500; 100 when omitted." }),
      Schema.compose(Schema.NumberFromString),
      Schema.int(),
      Schema.between(1, 500)
    ).annotations({ message: () => ({ message: "must be an integer from 1 to 500", override: true }) }),
    { exact: true }
  )
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
  .middleware(Authentication)
{}
