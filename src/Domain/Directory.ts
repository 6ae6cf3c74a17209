import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The account's directory (D23): its repositories and its people by name, for clients to
 * resolve the ids every other answer carries. Names change; ids do not, so nothing else in the
 * API carries a name.
 */

/** The longest `q` a directory read takes: a name's substring, never a pattern. */
export const MAX_QUERY_LENGTH = 100

export class DirectoryRepository extends Schema.Class<DirectoryRepository>("DirectoryRepository")({
  id: Schema.String,
  name: Schema.String,
  /** Whether the repository has an override of the account policy saved (D5). */
  has_policy_override: Schema.Boolean,
  created_at: Schema.DateTimeUtc
}) {}

export class RepositoryPage extends Schema.Class<RepositoryPage>("RepositoryPage")({
  repositories: Schema.Array(DirectoryRepository),
  next_after: Schema.NullOr(Schema.String)
}) {}

export class DirectoryMember extends Schema.Class<DirectoryMember>("DirectoryMember")({
  id: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean,
  disabled: Schema.Boolean,
  /** Only in an administrator's read. */
  email: Schema.optionalWith(Schema.String, { exact: true })
}) {}

export class MemberPage extends Schema.Class<MemberPage>("MemberPage")({
  members: Schema.Array(DirectoryMember),
  next_after: Schema.NullOr(Schema.String)
}) {}

export class MemberNotFound extends Schema.TaggedError<MemberNotFound>()(
  "MemberNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}
