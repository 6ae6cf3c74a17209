import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { VersionConflict } from "../Domain/Errors.js"
import { AccountPolicyRecord, RepositoryNotFound, RepositoryPolicyRecord } from "../Domain/Policy.js"
import { Policy, PolicyOverride } from "../Domain/PolicyCatalog.js"
import { problem } from "../Domain/Problem.js"
import { RequestBody } from "../Domain/Strict.js"
import { ExpectedVersion } from "../Domain/Version.js"
import { Capabilities } from "./Capabilities.js"

export const AccountPolicyRequest = RequestBody("AccountPolicyRequest", {
  policy: Policy,
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true })
})

export const RepositoryPolicyRequest = RequestBody("RepositoryPolicyRequest", {
  // The whole override; `{}` removes it.
  policy: PolicyOverride,
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true })
})

/** Path parameters stay plain strings; the service decides what is unknown (D3). */
const RepositoryPath = Schema.Struct({ repository_id: Schema.String })

/** The account autonomy policy, per-repository overrides and the capability matrix (seed §4.4–4.8, D4, D5). */
export class PoliciesApi extends HttpApiGroup.make("policies")
  .add(
    HttpApiEndpoint.get("getCapabilities", "/developer/account/capabilities")
      .annotate(OpenApi.Summary, "Capabilities")
      .annotate(
        OpenApi.Description,
        "Which policy values are accepted and which take effect, per field, in order; read before rendering controls."
      )
      .addSuccess(Capabilities)
  )
  .add(
    HttpApiEndpoint.get("getAccountPolicy", "/developer/account/policy")
      .annotate(OpenApi.Summary, "The account policy")
      .annotate(OpenApi.Description, "Version 0 with the defaults and updated_at null until a policy is saved.")
      .addSuccess(AccountPolicyRecord)
  )
  .add(
    HttpApiEndpoint.put("replaceAccountPolicy", "/developer/account/policy")
      .annotate(OpenApi.Summary, "Replace the account policy")
      .annotate(
        OpenApi.Description,
        "All twelve fields; expected_version is the version last read (omitted means 0). A stale version is 409 version_conflict with current_version."
      )
      .setPayload(AccountPolicyRequest)
      .addSuccess(AccountPolicyRecord)
      .addError(problem(VersionConflict))
  )
  .add(
    HttpApiEndpoint.get("getRepositoryPolicy", "/developer/account/repositories/:repository_id/policy")
      .annotate(OpenApi.Summary, "A repository's policy")
      .annotate(
        OpenApi.Description,
        "The sparse override (null when the repository inherits everything) and the effective policy, with where each field comes from."
      )
      .setPath(RepositoryPath)
      .addSuccess(RepositoryPolicyRecord)
      .addError(problem(RepositoryNotFound))
  )
  .add(
    HttpApiEndpoint.put("replaceRepositoryPolicy", "/developer/account/repositories/:repository_id/policy")
      .annotate(OpenApi.Summary, "Replace a repository's override")
      .annotate(
        OpenApi.Description,
        "Only the fields to change; {} removes the override. expected_version is the override version last read."
      )
      .setPath(RepositoryPath)
      .setPayload(RepositoryPolicyRequest)
      .addSuccess(RepositoryPolicyRecord)
      .addError(problem(RepositoryNotFound))
      .addError(problem(VersionConflict))
  )
  .middleware(Authentication)
{}
