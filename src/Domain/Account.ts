import { Context, Schema } from "effect"

/** Ids are UUIDv7 strings (D3). */
export const UserId = Schema.UUID.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type

export const SessionId = Schema.UUID.pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type

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

/** The account a wallet, policy and repositories belong to: an organisation ("client") or a lone user (D3). */
export const AccountKind = Schema.Literal("client", "user")
export type AccountKind = typeof AccountKind.Type

export class Account extends Schema.Class<Account>("Account")({
  kind: AccountKind,
  id: Schema.String
}) {}

export class User extends Schema.Class<User>("User")({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean
}) {}

export class SignInSession extends Schema.Class<SignInSession>("SignInSession")({
  id: Schema.String,
  expires_at: Schema.DateTimeUtc
}) {}

/** Who is calling: provided to every protected handler by the authentication middleware. */
export class CurrentUser extends Context.Tag("CurrentUser")<CurrentUser, {
  readonly user: User
  /** The queue dashboard's role (D9): set by operators with the CLI, never shown to clients. */
  readonly isOperator: boolean
  readonly account: Account
  readonly session: SignInSession
}>() {}
