import type { AccountApiClient } from "@account-api/client/web"
import { formatTime, shortId } from "../format.js"
import { Money } from "./Money.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type Limit = Limits["limits"][number]

const scopeOf = (limit: Limit): string =>
  limit.scope_id === null ? limit.scope : `${limit.scope} ${shortId(limit.scope_id)}`

/**
 * Each spend limit with its use as a filling bar (a `meter`, given the API's decimal strings as
 * they are: the browser draws it) and when its period ends.
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
              <Money value={limit.used_usd} /> used of <Money value={limit.amount_usd} />
            </span>
            <meter
              min="0"
              max={limit.amount_usd}
              value={limit.used_usd}
              aria-labelledby={`limit-${limit.id}`}
            />
            <span class="muted">
              {limit.period_end === null
                ? "Counts each session on its own"
                : `Period ends ${formatTime(limit.period_end)}`}
            </span>
          </li>
        ))}
      </ul>
    )
