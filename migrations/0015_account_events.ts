import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D17 (docs/decisions/D17-events-and-webhooks.md), its first part: the per-account event log
 * (the outbox every change that causes an event writes in its own transaction), the live
 * stream's notification, and the accounts' alert thresholds.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Where each account's log stands: `last_position` is taken and advanced under this row's lock by
  // the transaction that appends, so positions are given in commit order per account. Ids are
  // UUID v7 from the clock, and two transactions can commit in the other order than they took
  // their ids; a reader that resumed "after the newest id it saw" could then skip an event
  // committed late. Reading by position cannot.
  yield* sql`
    CREATE TABLE account_event_heads (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      last_position bigint NOT NULL CHECK (last_position > 0),
      PRIMARY KEY (account_kind, account_id)
    )`
  // `data` is json, not jsonb, so it is sent byte for byte as written, keys in the catalog's order.
  yield* sql`
    CREATE TABLE account_events (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      position bigint NOT NULL CHECK (position > 0),
      type text NOT NULL CHECK (type <> ''),
      data json NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      -- "Oldest first after an event", per account: keyset paging on this index.
      CONSTRAINT account_events_position_key UNIQUE (account_kind, account_id, position)
    )`
  // Pruning after 30 days finds the old rows by index, oldest first.
  yield* sql`CREATE INDEX account_events_created_at_idx ON account_events (created_at)`

  // Append-only, as the ledger (D7), with one exception: a row older than the 30 days events are
  // kept may be deleted (the pruning). The database refuses any update, any truncate, and the
  // deletion of a younger row, whoever asks.
  yield* sql`
    CREATE FUNCTION account_events_refuse_change() RETURNS trigger AS $$
    BEGIN
      IF TG_OP = 'DELETE' AND OLD.created_at < now() - interval '30 days' THEN
        RETURN OLD;
      END IF;
      RAISE EXCEPTION 'account events are append-only (deleted only after 30 days): % is refused', TG_OP
        USING ERRCODE = 'restrict_violation';
    END
    $$ LANGUAGE plpgsql`
  yield* sql`
    CREATE TRIGGER account_events_append_only
    BEFORE UPDATE OR DELETE ON account_events
    FOR EACH ROW EXECUTE FUNCTION account_events_refuse_change()`
  yield* sql`
    CREATE TRIGGER account_events_no_truncate
    BEFORE TRUNCATE ON account_events
    FOR EACH STATEMENT EXECUTE FUNCTION account_events_refuse_change()`

  // Every append is announced on one channel, at commit (PostgreSQL delivers NOTIFY only then, and
  // never for a transaction that rolled back), whoever writes it: an API process or the worker.
  // The payload is only the account; a listener reads the log itself, so nothing is lost to the
  // notification's size limit or to a listener that reconnects. Identical notifications of one
  // transaction are folded into one by PostgreSQL.
  yield* sql`
    CREATE FUNCTION announce_account_event() RETURNS trigger AS $$
    BEGIN
      PERFORM pg_notify('account_events', NEW.account_kind || ':' || NEW.account_id);
      RETURN NULL;
    END
    $$ LANGUAGE plpgsql`
  yield* sql`
    CREATE TRIGGER account_events_announce AFTER INSERT ON account_events
    FOR EACH ROW EXECUTE FUNCTION announce_account_event()`

  // An account's alert thresholds (D17), replaced whole by PUT, versioned as D5 (no row is version 0).
  yield* sql`
    CREATE TABLE account_alerts (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      version integer NOT NULL CHECK (version > 0),
      thresholds json NOT NULL CHECK (json_typeof(thresholds) = 'array'),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_kind, account_id)
    )`
})
