import { Effect } from "effect"
import { type Account, accountKey } from "../Domain/Account.js"
import { RateLimited } from "../Domain/Errors.js"
import { STREAM_BOUNDS } from "../Domain/Events.js"
import { noticeOf } from "./Channel.js"

/** The bounds on live streams open at once on one process (D17), as `AppConfig.eventStreams` holds them. */
interface StreamBounds {
  readonly perUser: number
  readonly perAccount: number
}

/**
 * What a refused stream is told to wait. A place is freed the moment a stream ends (the client
 * hangs up, or is cut off as stalled), so a client that closed one and opens another is not kept
 * waiting; one that holds them all waits as a reconnecting reader would.
 */
const RETRY_AFTER_SECONDS = 5

const refusal = (name: string, limit: number, whose: string) =>
  new RateLimited({
    detail: `At most ${limit} live event streams ${whose} may be open at once on one process ` +
      `(${name}); close one, or retry after the wait.`,
    retry_after_seconds: RETRY_AFTER_SECONDS,
    limit_name: name,
    limit
  })

const add = (counts: Map<string, number>, key: string, by: number) => {
  const now = (counts.get(key) ?? 0) + by
  if (now === 0) counts.delete(key)
  else counts.set(key, now)
}

/**
 * Counts the live streams open on this process by user and by account. Each stream holds a
 * socket, a fiber and a place among its account's followers for as long as it lasts: one member
 * opening hundreds must not crowd out the others, nor another account.
 */
export const makeStreamGate = (bounds: StreamBounds) => {
  const byUser = new Map<string, number>()
  const byAccount = new Map<string, number>()
  let open = 0

  /** A place for one stream of `userId` in `account`: the function that frees it (idempotent), or 429. */
  const enter = (account: Account, userId: string) =>
    Effect.suspend(() => {
      const accountId = noticeOf(accountKey(account))
      if ((byUser.get(userId) ?? 0) >= bounds.perUser) {
        return Effect.fail(refusal(STREAM_BOUNDS.perUser, bounds.perUser, "of one user"))
      }
      if ((byAccount.get(accountId) ?? 0) >= bounds.perAccount) {
        return Effect.fail(refusal(STREAM_BOUNDS.perAccount, bounds.perAccount, "of one account"))
      }
      add(byUser, userId, 1)
      add(byAccount, accountId, 1)
      open += 1
      let left = false
      return Effect.succeed(() => {
        if (left) return
        left = true
        add(byUser, userId, -1)
        add(byAccount, accountId, -1)
        open -= 1
      })
    })

  return { enter, open: () => open } as const
}
