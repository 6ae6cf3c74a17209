import Accounts from "./0001_accounts.js"
import Policies from "./0002_policies.js"
import Wallets from "./0003_wallets.js"
import Settlement from "./0004_settlement.js"
import Operators from "./0005_operators.js"
import NormalizedEmails from "./0006_normalized_emails.js"
import SettlementFingerprints from "./0007_settlement_fingerprints.js"
import DisabledUsers from "./0008_disabled_users.js"
import IdempotencyResults from "./0009_idempotency_results.js"
import SessionsAndExport from "./0010_sessions_and_export.js"
import SignInChanges from "./0011_sign_in_changes.js"
import ExtendTtlAndSessionBalances from "./0012_extend_ttl_and_session_balances.js"
import SignInPruning from "./0013_sign_in_pruning.js"
import SpendControls from "./0014_spend_controls.js"
import AccountEvents from "./0015_account_events.js"
import LimitAnnouncements from "./0016_limit_announcements.js"
import Webhooks from "./0017_webhooks.js"
import SignInChangesPerStatement from "./0018_sign_in_changes_per_statement.js"
import SpendLimitUsed from "./0019_spend_limit_used.js"
import FleetControls from "./0020_fleet_controls.js"
import LedgerAsOf from "./0021_ledger_as_of.js"
import LimitUseByScope from "./0022_limit_use_by_scope.js"
import FewerIndexWrites from "./0023_fewer_index_writes.js"
import ScopeCounterCheck from "./0024_scope_counter_check.js"
import WalletChangeNotices from "./0025_wallet_change_notices.js"
import CreditGrants from "./0026_credit_grants.js"
import GrantBooksViews from "./0027_grant_books_views.js"
import LimitsWherePeopleLive from "./0028_limits_where_people_live.js"
import LimitRaiseRequests from "./0029_limit_raise_requests.js"

/**
 * Every migration, in order. Listed statically (not discovered on disk) so the
 * same loader works under tsx, vitest and any bundler; add a line per file.
 */
export const migrations = {
  "0001_accounts": Accounts,
  "0002_policies": Policies,
  "0003_wallets": Wallets,
  "0004_settlement": Settlement,
  "0005_operators": Operators,
  "0006_normalized_emails": NormalizedEmails,
  "0007_settlement_fingerprints": SettlementFingerprints,
  "0008_disabled_users": DisabledUsers,
  "0009_idempotency_results": IdempotencyResults,
  "0010_sessions_and_export": SessionsAndExport,
  "0011_sign_in_changes": SignInChanges,
  "0012_extend_ttl_and_session_balances": ExtendTtlAndSessionBalances,
  "0013_sign_in_pruning": SignInPruning,
  "0014_spend_controls": SpendControls,
  "0015_account_events": AccountEvents,
  "0016_limit_announcements": LimitAnnouncements,
  "0017_webhooks": Webhooks,
  "0018_sign_in_changes_per_statement": SignInChangesPerStatement,
  "0019_spend_limit_used": SpendLimitUsed,
  "0020_fleet_controls": FleetControls,
  "0021_ledger_as_of": LedgerAsOf,
  "0022_limit_use_by_scope": LimitUseByScope,
  "0023_fewer_index_writes": FewerIndexWrites,
  "0024_scope_counter_check": ScopeCounterCheck,
  "0025_wallet_change_notices": WalletChangeNotices,
  "0026_credit_grants": CreditGrants,
  "0027_grant_books_views": GrantBooksViews,
  "0028_limits_where_people_live": LimitsWherePeopleLive,
  "0029_limit_raise_requests": LimitRaiseRequests
}
