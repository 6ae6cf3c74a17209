import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A change notice for the console's live overview (D20, D17 "change notices"): every write of a
  // wallet's row (a budget, a credit, a settlement batch's reserves, spends, releases and
  // expiries) announces its account on a channel of its own, at commit, whoever wrote it. Not an
  // event: nothing is stored, and the webhook relay, which listens on `account_events`, never
  // hears it. A transaction's identical notifications are folded into one by PostgreSQL, so a
  // batch announces each account it moved once.
  yield* sql`
    CREATE FUNCTION announce_wallet_change() RETURNS trigger AS $$
    BEGIN
      PERFORM pg_notify('wallet_changes', NEW.account_kind || ':' || NEW.account_id);
      RETURN NULL;
    END
    $$ LANGUAGE plpgsql`
  yield* sql`
    CREATE TRIGGER wallets_announce_change AFTER INSERT OR UPDATE ON wallets
    FOR EACH ROW EXECUTE FUNCTION announce_wallet_change()`
})
