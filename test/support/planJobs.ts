import type { ReservePayload, SettlementJob } from "../../src/Settlement/Jobs.js"

/**
 * Settlement jobs of one account for the planner's tests, each with a fresh idempotency key: a
 * reserve with the terms of D16 and D19 (attribution, cap, labels), a spend, a release.
 */
export const planJobs = (accountId: string) => {
  let keys = 0
  const nextKey = () => `k-${++keys}`
  const reserve = (
    session_id: string,
    amount_usd: string,
    terms: Pick<ReservePayload, "repository_id" | "user_id" | "max_usd" | "labels"> = {}
  ): SettlementJob => ({
    kind: "reserve",
    payload: { account_id: accountId, session_id, amount_usd, idempotency_key: nextKey(), ...terms }
  })
  const spend = (session_id: string, amount_usd: string): SettlementJob => ({
    kind: "spend",
    payload: { account_id: accountId, session_id, amount_usd, idempotency_key: nextKey() }
  })
  const release = (session_id: string): SettlementJob => ({
    kind: "release",
    payload: { account_id: accountId, session_id, idempotency_key: nextKey() }
  })
  return { reserve, spend, release } as const
}
