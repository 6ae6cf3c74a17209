import { Schema } from "effect"
import { Account, type AccountKey, AccountKind } from "../Domain/Account.js"

/**
 * The channel the event log's trigger announces appends on (migration 0015), at commit. Its
 * payload names only the account whose log grew; a listener reads the log itself.
 */
export const EVENTS_CHANNEL = "account_events"

/**
 * The channel every write of a wallet's row announces its account on (migration 0025), at
 * commit: the live stream's change notices (D17), never an event, and never heard by the
 * webhook relay, which listens on `EVENTS_CHANNEL` alone. Its payload is `kind:id` too.
 */
export const WALLET_CHANGES_CHANNEL = "wallet_changes"

/** The payload the trigger writes for an account: `kind:id`. */
export const noticeOf = (key: AccountKey) => `${key.account_kind}:${key.account_id}`

const isAccountKind = Schema.is(AccountKind)

/** The account a payload names, or nothing for a payload the trigger does not write. */
export const accountOfNotice = (payload: string): Account | undefined => {
  const [kind = "", id = ""] = payload.split(":")
  return isAccountKind(kind) && id !== "" ? new Account({ kind, id }) : undefined
}
