import { Context, Schema } from "effect"

/** Ids are UUIDv7 strings (D3). */
export const UserId = Schema.UUID.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type

/** A sign-in: the server-side half of a bearer token (its `sid` claim), so logout can revoke it (D2). */
export const SignInId = Schema.UUID.pipe(Schema.brand("SignInId"))
export type SignInId = typeof SignInId.Type

/** Whether a string can be an id at all: one that cannot is unknown without asking the database (D3). */
export const isUuid = Schema.is(Schema.UUID)

/**
 * The one spelling of an email address: NFKC, then lower case. Stored in this
 * form and used for every lookup and every sign-in counter (D2), so look-alike
 * spellings (fullwidth letters, other cases) are one address, and no
 * spelling that PostgreSQL would match but JavaScript would count apart (or
 * the reverse) gives an attacker a fresh counter.
 */
export const normalizeEmail = (email: string): string => email.trim().normalize("NFKC").toLowerCase()

/** What passes for an email address, at sign-in and when an operator creates a user. */
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** The account a wallet, policy and repositories belong to: an organisation ("client") or a lone user (D3). */
export const AccountKind = Schema.Literal("client", "user")
export type AccountKind = typeof AccountKind.Type

export class Account extends Schema.Class<Account>("Account")({
  kind: AccountKind,
  id: Schema.String
}) {}

/** An account as rows and repositories name it: the pair of columns every per-account table has. */
export const AccountKey = Schema.Struct({ account_kind: AccountKind, account_id: Schema.String })
export type AccountKey = typeof AccountKey.Type

export const accountKey = (account: Account): AccountKey => ({ account_kind: account.kind, account_id: account.id })

export const accountOfKey = (key: AccountKey): Account => new Account({ kind: key.account_kind, id: key.account_id })

export class User extends Schema.Class<User>("User")({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean
}) {}

/** A sign-in as clients see it (`session` in `GET /auth/me`); the schema keeps its published name. */
export class SignIn extends Schema.Class<SignIn>("SignInSession")({
  id: Schema.String,
  expires_at: Schema.DateTimeUtc
}) {}

/** Who is calling: provided to every protected handler by the authentication middleware. */
export class CurrentUser extends Context.Tag("CurrentUser")<CurrentUser, {
  readonly user: User
  /** The queue dashboard's role (D9): set by operators with the CLI, never shown to clients. */
  readonly isOperator: boolean
  readonly account: Account
  readonly signIn: SignIn
}>() {}

/** A user as stored, with their credentials and membership: what sign-in and the operators' commands read. */
export class UserRecord extends Schema.Class<UserRecord>("UserRecord")({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean,
  is_operator: Schema.Boolean,
  disabled: Schema.Boolean,
  password_hash: Schema.String,
  organisation_id: Schema.NullOr(Schema.String)
}) {}

/** Built from rows their schema has decoded: validating again is redundant, and it runs on every request. */
const decoded = { disableValidation: true } as const

/** The account is the user's organisation when they have one, otherwise the user (D3). */
export const accountOf = (user: Pick<UserRecord, "id" | "organisation_id">): Account =>
  user.organisation_id === null
    ? new Account({ kind: "user", id: user.id }, decoded)
    : new Account({ kind: "client", id: user.organisation_id }, decoded)

export const userOf = (user: UserRecord): User =>
  new User({ id: user.id, email: user.email, name: user.name, is_admin: user.is_admin }, decoded)
