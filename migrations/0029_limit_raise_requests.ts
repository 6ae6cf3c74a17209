import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D22 (docs/decisions/D22-limits-where-people-live.md#raise-requests): limit raise requests. A
 * member asks for a temporary raise of a spend limit; an administrator approves it (the limit's
 * D19 raise is set in the same transaction) or declines it. A request outlives its limit: a PUT
 * that removes the limit leaves the request with a null `limit_id`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE limit_raise_requests (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      limit_id uuid REFERENCES spend_limits (id) ON DELETE SET NULL,
      amount_usd numeric(18, 6) NOT NULL CHECK (amount_usd > 0),
      until timestamptz NOT NULL,
      reason text NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 500),
      requested_by uuid NOT NULL,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'declined')),
      decided_by uuid,
      decided_at timestamptz,
      decided_amount_usd numeric(18, 6) CHECK (decided_amount_usd > 0),
      decided_until timestamptz,
      decline_reason text CHECK (char_length(decline_reason) BETWEEN 1 AND 500),
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((state = 'pending') = (decided_by IS NULL) AND (decided_by IS NULL) = (decided_at IS NULL)),
      CHECK ((state = 'approved') = (decided_amount_usd IS NOT NULL)
        AND (decided_amount_usd IS NULL) = (decided_until IS NULL)),
      CHECK (state = 'declined' OR decline_reason IS NULL)
    )`
  // The listing, newest first, of an account's requests (an administrator's read) or one
  // member's; the pending ones apart, as few as 20 an account, for the count a new request is
  // held to and the default read.
  yield* sql`CREATE INDEX limit_raise_requests_account_idx ON limit_raise_requests (account_kind, account_id, created_at DESC, id DESC)`
  yield* sql`
    CREATE INDEX limit_raise_requests_pending_idx ON limit_raise_requests (account_kind, account_id, created_at DESC)
    WHERE state = 'pending'`
  // A PUT that removes limits sets their requests' limit_id to null: found by this index, not a scan.
  yield* sql`CREATE INDEX limit_raise_requests_limit_idx ON limit_raise_requests (limit_id) WHERE limit_id IS NOT NULL`
})
