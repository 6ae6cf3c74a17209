import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { cappedFields, Policy, PolicyOverride, recordOf, sources } from "./PolicyCatalog.js"

// The autonomy policy as clients read it: the account's record, a repository's override and the merged view (D4, D5).

/** An unknown repository, one of another account, or an id that is not a UUID: all alike (D3). */
export class RepositoryNotFound extends Schema.TaggedError<RepositoryNotFound>()(
  "RepositoryNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

export class AccountPolicyRecord extends Schema.Class<AccountPolicyRecord>("AccountPolicyRecord")({
  scope: Schema.Literal("account"),
  scope_id: Schema.String,
  version: Schema.Int.annotations({ description: "0 while nothing is saved and the policy shown is the defaults." }),
  policy: Policy,
  updated_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

export class RepositoryOverride extends Schema.Class<RepositoryOverride>("RepositoryOverride")({
  scope: Schema.Literal("repository"),
  version: Schema.Int,
  policy: PolicyOverride
}) {}

const Source = Schema.Literal(...sources)

export class EffectivePolicy extends Schema.Class<EffectivePolicy>("EffectivePolicy")({
  scope: Schema.Literal("effective"),
  policy: Policy,
  sources: Schema.Struct(recordOf(() => Source)).annotations({
    identifier: "PolicySources",
    description: "Where each field's value comes from."
  }),
  capped: Schema.Array(Schema.Literal(...cappedFields)).annotations({
    description: "The delivery fields the autonomy ceiling lowered."
  })
}) {}

export class RepositoryPolicyRecord extends Schema.Class<RepositoryPolicyRecord>("RepositoryPolicyRecord")({
  repository_id: Schema.String,
  override: Schema.NullOr(RepositoryOverride),
  effective: EffectivePolicy
}) {}
