import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D17 (docs/decisions/D17-events-and-webhooks.md), webhooks: the accounts' endpoints, the relay's
 * cursor per account (how far its log has been handed to delivery), and every delivery attempt.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // `secret` signs every delivery, so it is kept as it must be used (the base64 text after
  // `whsec_`); it is answered only once, when made. During a rotation the previous one signs
  // beside it until `previous_secret_until`. `types` null means every type. `failing_since` is
  // the first failed attempt since the last success: five days of only failures disable it.
  yield* sql`
    CREATE TABLE webhook_endpoints (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      url text NOT NULL CHECK (url <> ''),
      description text,
      types text[],
      enabled boolean NOT NULL DEFAULT true,
      disabled_reason text,
      secret text NOT NULL,
      previous_secret text,
      previous_secret_until timestamptz,
      failing_since timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX webhook_endpoints_account_idx ON webhook_endpoints (account_kind, account_id, id)`

  // Where the relay stands in each account's log: every event at or before `position` has its
  // delivery jobs in the queue. Advanced only after they were added, under this row's lock, so a
  // relay that dies adds them again (harmless: a job's id is its event and endpoint).
  yield* sql`
    CREATE TABLE webhook_relay_cursors (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      position bigint NOT NULL CHECK (position >= 0),
      PRIMARY KEY (account_kind, account_id)
    )`

  // One row per attempt to deliver an event to an endpoint, for GET …/webhooks/{id}/deliveries.
  yield* sql`
    CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      event_id uuid NOT NULL,
      event_type text NOT NULL,
      attempt integer NOT NULL CHECK (attempt > 0),
      status_code integer,
      duration_ms integer NOT NULL CHECK (duration_ms >= 0),
      outcome text NOT NULL,
      error text,
      next_attempt_at timestamptz,
      attempted_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id DESC)`
  // Attempts are kept as long as events (30 days); the relay's sweep deletes older ones by this index.
  yield* sql`CREATE INDEX webhook_deliveries_attempted_at_idx ON webhook_deliveries (attempted_at)`
})
