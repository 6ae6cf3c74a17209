import type { AccountApiError } from "@account-api/client/web"
import { isTransient } from "../session.js"

/**
 * A problem the API answered (or no answer), said plainly in a live region. Transient ones
 * (503, 429, no answer) say when the console tries again by itself and offer "Try again" now;
 * a 403 says the page is an administrator's, never a broken page.
 */
export const ProblemBanner = (
  { problem, retryInSeconds, onRetry }: {
    readonly problem: AccountApiError | undefined
    readonly retryInSeconds?: number | undefined
    readonly onRetry?: (() => void) | undefined
  }
) => {
  if (problem === undefined) return null
  const transient = isTransient(problem)
  return (
    <div class={transient ? "banner banner-warning" : "banner banner-error"} role="alert">
      <p class="banner-title">{titleOf(problem)}</p>
      <p>{problem.detail}</p>
      {transient && retryInSeconds !== undefined && <p>Trying again in {retryInSeconds} s.</p>}
      {transient && onRetry !== undefined && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  )
}

const titleOf = (problem: AccountApiError): string => {
  if (problem.status === 0) return "The service did not answer."
  if (problem.status === 503) return "The service is unavailable for a moment."
  if (problem.status === 429) return "Too many requests for now."
  if (problem.status === 403) return "This is for the account's administrators."
  if (problem.status === 422) return "Some values need fixing."
  if (problem.status === 409) return "This changed since you read it."
  if (problem.status >= 500) return "The service failed to answer."
  return "The request was refused."
}
