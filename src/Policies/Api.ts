import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Auth/Api.js"
import { VersionConflict } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
import { RequestBody } from "../Domain/Strict.js"
import { Capabilities } from "./Capabilities.js"
import { Policy } from "./Catalog.js"

/** Omitted means "I expect version 0": nothing saved yet (D5). */
const ExpectedVersion = Schema.optionalWith(
  Schema.Int.pipe(Schema.nonNegative()).annotations({
    message: () => ({ message: "must be a non-negative integer", override: true }),
    description: "The version last read; omit it when nothing is saved yet (version 0)."
  }),
  { exact: true }
)

export const AccountPolicyRequest = RequestBody("AccountPolicyRequest", {
  policy: Policy,
  expected_version: ExpectedVersion
})

export class AccountPolicyRecord extends Schema.Class<AccountPolicyRecord>("AccountPolicyRecord")({
  scope: Schema.Literal("account"),
  scope_id: Schema.String,
  version: Schema.Int.annotations({ description: "0 while nothing is saved and the policy shown is the defaults." }),
  policy: Policy,
  updated_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

/** The account autonomy policy and the capability matrix (seed §4.4–4.6, D4, D5). */
export class PoliciesApi extends HttpApiGroup.make("policies")
  .add(
    HttpApiEndpoint.get("getCapabilities", "/developer/account/capabilities")
      .addSuccess(Capabilities)
  )
  .add(
    HttpApiEndpoint.get("getAccountPolicy", "/developer/account/policy")
      .addSuccess(AccountPolicyRecord)
  )
  .add(
    HttpApiEndpoint.put("replaceAccountPolicy", "/developer/account/policy")
      .setPayload(AccountPolicyRequest)
      .addSuccess(AccountPolicyRecord)
      .addError(problem(VersionConflict))
  )
  .middleware(Authentication)
{}
