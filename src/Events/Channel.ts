import { Schema } from "effect"
import { Account, type AccountKey, AccountKind } from "../Domain/Account.js"

/**
 * The channel the event log's trigger announces appends on (migration 0015), at commit. Its
 * payload names only the account whose log grew; a listener reads the log itself.
 */
export const EVENTS_CHANNEL = "account_events"

/** The payload the trigger writes for an account: `kind:id`. */
export const noticeOf = (key: AccountKey) => `${key.account_kind}:${key.account_id}`

const isAccountKind = Schema.is(AccountKind)

/** The account a payload names, or nothing for a payload the trigger does not write. */
export const accountOfNotice = (payload: string): Account | undefined => {
  const [kind = "", id = ""] = payload.split(":")
  return isAccountKind(kind) && id !== "" ? new Account({ kind, id }) : undefined
}
