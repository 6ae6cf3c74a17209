import { Effect } from "effect"
import type { Account } from "../Domain/Account.js"
import { RateLimited } from "../Domain/Errors.js"

/**
 * Exports running at once (issue 22): a handful per process and two per account. An export
 * holds no database connection between its pages, but each holds a socket, its buffers and a
 * fiber for as long as its reader takes; one member's many slow readers must not crowd out
 * everyone else's.
 */
export const EXPORTS_PER_PROCESS = 8
export const EXPORTS_PER_ACCOUNT = 2
/** What a refused export is told to wait: an export of a large wallet takes seconds. */
const RETRY_AFTER_SECONDS = 5

/** Counts exports in flight; `enter` answers the function that ends one (idempotent), or fails 429. */
export const makeExportGate = () => {
  let running = 0
  const perAccount = new Map<string, number>()
  const enter = (account: Account) =>
    Effect.suspend(() => {
      const key = `${account.kind}:${account.id}`
      const mine = perAccount.get(key) ?? 0
      if (running >= EXPORTS_PER_PROCESS || mine >= EXPORTS_PER_ACCOUNT) {
        return Effect.fail(
          new RateLimited({
            detail: mine >= EXPORTS_PER_ACCOUNT
              ? `At most ${EXPORTS_PER_ACCOUNT} exports of one account run at once; retry when one has finished.`
              : "Too many exports are running; retry shortly.",
            retry_after_seconds: RETRY_AFTER_SECONDS
          })
        )
      }
      running++
      perAccount.set(key, mine + 1)
      let left = false
      return Effect.succeed(() => {
        if (left) return
        left = true
        running--
        const now = (perAccount.get(key) ?? 1) - 1
        if (now === 0) perAccount.delete(key)
        else perAccount.set(key, now)
      })
    })
  return { enter } as const
}
