import type { AccountApiClient } from "@account-api/client/web"
import { useDirectory } from "../directory.js"
import { scopeWords } from "../events.js"
import { formatTime } from "../format.js"
import { Money } from "./Money.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type Limit = Limits["limits"][number]

/** What a limit governs, by name (D23): the account, a repository or user, a label, each session. */
export const ScopeName = ({ limit }: { readonly limit: Pick<Limit, "scope" | "scope_id"> }) => {
  const directory = useDirectory()
  const words = scopeWords(directory, { scope: limit.scope, scope_id: limit.scope_id === "" ? null : limit.scope_id })
  return <span title={limit.scope_id ?? undefined}>{`${words.charAt(0).toUpperCase()}${words.slice(1)}`}</span>
}

/** A limit's use against what it enforces now: sessions open for a concurrent limit, money for the others. */
const UseOf = ({ limit }: { readonly limit: Limit }) =>
  limit.max_open_sessions !== null
    ? <>{limit.open_sessions ?? 0} of {limit.max_open_sessions} sessions open</>
    : (
      <>
        <Money value={limit.used_usd ?? "0"} /> used of <Money value={limit.effective_amount_usd ?? "0"} />
        {limit.raise !== null && limit.effective_amount_usd === limit.raise.amount_usd &&
          ` (raised until ${formatTime(limit.raise.until)})`}
      </>
    )

/**
 * Each limit with its use as a filling bar (a `meter`, given the API's decimal strings as they
 * are: the browser draws it) and when its period ends.
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
              {limit.period === "concurrent" ? ": " : `, per ${limit.period}: `}
              <UseOf limit={limit} />
            </span>
            <meter
              min="0"
              max={limit.max_open_sessions ?? limit.effective_amount_usd ?? undefined}
              value={limit.open_sessions ?? limit.used_usd ?? undefined}
              aria-labelledby={`limit-${limit.id}`}
            />
            <span class="muted">
              {limit.period === "concurrent"
                ? "Sessions open at once"
                : limit.period_end === null
                ? "Counts each session on its own"
                : `Period ends ${formatTime(limit.period_end)}`}
            </span>
          </li>
        ))}
      </ul>
    )
