import type { AccountApiClient } from "@account-api/client/web"
import { useDirectory } from "../directory.js"
import { perPeriodWords, scopeWords } from "../events.js"
import { formatLocalTime } from "../format.js"
import { ResetOf } from "../zone.js"
import { Money } from "./Money.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type Limit = Limits["limits"][number]

/** What a limit governs, by name (D23): the account, a repository or user, a label, each session. */
export const ScopeName = ({ limit }: { readonly limit: Pick<Limit, "scope" | "scope_id"> }) => {
  const directory = useDirectory()
  const words = scopeWords(directory, { scope: limit.scope, scope_id: limit.scope_id === "" ? null : limit.scope_id })
  return <span title={limit.scope_id ?? undefined}>{`${words.charAt(0).toUpperCase()}${words.slice(1)}`}</span>
}

/** Whether a limit applies to each user, repository or label value on its own (D22): its use is each one's. */
export const isEach = (limit: Pick<Limit, "scope">) => limit.scope.startsWith("each_")

/**
 * A limit's use against what it enforces now: sessions open for a concurrent limit, money for the
 * others; an `each_` limit's bound is per member, each with their own use (the effective read's).
 */
export const UseOf = ({ limit }: { readonly limit: Limit }) =>
  isEach(limit)
    ? (
      <>
        {limit.max_open_sessions !== null
          ? `${limit.max_open_sessions} sessions at once`
          : <Money value={limit.effective_amount_usd ?? "0"} />} per member
      </>
    )
    : limit.max_open_sessions !== null
    ? <>{limit.open_sessions ?? 0} of {limit.max_open_sessions} sessions open</>
    : (
      <>
        <Money value={limit.used_usd ?? "0"} /> used of <Money value={limit.effective_amount_usd ?? "0"} />
        {limit.raise !== null && limit.effective_amount_usd === limit.raise.amount_usd &&
          ` (raised until ${formatLocalTime(limit.raise.until)})`}
      </>
    )

/**
 * Each limit with its use as a filling bar (a `meter`, given the API's decimal strings as they
 * are: the browser draws it) and when its period resets, in the account's zone (D22). An
 * `each_` limit has no one use to draw: it says what each member may use.
 */
export const LimitsList = ({ limits }: { readonly limits: Limits }) =>
  limits.limits.length === 0
    ? <p class="muted">No spend limits are set.</p>
    : (
      <ul class="limits">
        {limits.limits.map((limit) => (
          <li key={limit.id} class="meter-row">
            <span id={`limit-${limit.id}`} data-limit={limit.id}>
              <ScopeName limit={limit} />
              {limit.period === "concurrent" ? ": " : `, ${perPeriodWords(limit)}: `}
              <UseOf limit={limit} />
            </span>
            {!isEach(limit) && (
              <meter
                min="0"
                max={limit.max_open_sessions ?? limit.effective_amount_usd ?? undefined}
                value={limit.open_sessions ?? limit.used_usd ?? undefined}
                aria-labelledby={`limit-${limit.id}`}
              />
            )}
            <span class="muted">
              <ResetOf limit={limit} zone={limits.timezone} />
            </span>
          </li>
        ))}
      </ul>
    )
