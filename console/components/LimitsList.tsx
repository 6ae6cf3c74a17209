import type { AccountApiClient } from "@account-api/client/web"
import { formatTime, shortId } from "../format.js"
import { Money } from "./Money.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type Limit = Limits["limits"][number]

/** What a limit governs: its scope, and the repository or user (shortened) or the label (whole) it names. */
export const scopeOf = (limit: Pick<Limit, "scope" | "scope_id">): string =>
  limit.scope_id === null || limit.scope_id === ""
    ? limit.scope
    : `${limit.scope} ${limit.scope === "label" ? limit.scope_id : shortId(limit.scope_id)}`

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
            <span id={`limit-${limit.id}`}>
              {`${scopeOf(limit)}, per ${limit.period}: `}
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
