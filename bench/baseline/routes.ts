import { Decimal } from "decimal.js"
import type pg from "pg"
import type { Caller } from "./auth.js"

/** What a handler gets once the caller is authenticated. */
export interface RouteContext {
  readonly caller: Caller
  readonly pool: pg.Pool
  readonly query: Readonly<Record<string, string | undefined>>
  readonly body: unknown
}

/**
 * The endpoints the baseline answers, one entry per endpoint a suite compares.
 * Each does the same work as the service's handler after authentication: the
 * same SQL, the same JSON (answered 200). To compare another endpoint, add it here.
 */
export interface Route {
  readonly method: "GET" | "POST" | "PUT"
  readonly url: string
  readonly handle: (context: RouteContext) => Promise<unknown>
}

/**
 * As src/Domain/Money.ts: exact decimal arithmetic with room for any sum of
 * balances, and six decimals out, zero never signed.
 */
const Exact = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_EVEN, toExpNeg: -40, toExpPos: 40 })
const formatUsd = (amount: Decimal): string => (amount.isZero() ? new Exact(0) : amount).toFixed(6)

/**
 * What src/Wallets/Repo.ts `findWalletJson` reads, and `insertWalletIfAbsent`: the wallet and,
 * by the same index, its live grants past their time and the next one to expire (D21), so
 * PostgreSQL does the same work for both servers; the JSON is built here.
 */
const FIND_WALLET = `SELECT w.id, w.account_kind, w.account_id, w.budget_usd, w.reserved_usd, w.spent_usd, w.enforced,
      w.version, w.created_at, w.updated_at,
      (SELECT coalesce(sum(g.amount_usd - g.drawn_usd - g.held_usd - g.ended_usd), 0) FROM wallet_grants g
        WHERE g.wallet_id = w.id AND g.moving AND g.state = 'live' AND g.expires_at <= now()) AS due_usd,
      n.expires_at AS next_at, n.free_usd AS next_free_usd
    FROM wallets w LEFT JOIN LATERAL (
      SELECT g.expires_at, g.amount_usd - g.drawn_usd - g.held_usd - g.ended_usd AS free_usd FROM wallet_grants g
      WHERE g.wallet_id = w.id AND g.moving AND g.state = 'live' AND g.expires_at > now()
      ORDER BY g.expires_at, g.priority, g.category DESC, g.created_at, g.id LIMIT 1
    ) n ON true
    WHERE w.account_id = $1 AND w.account_kind = $2`
const INSERT_WALLET_IF_ABSENT =
  `INSERT INTO wallets (account_kind, account_id) VALUES ($1, $2) ON CONFLICT (account_id) DO NOTHING`

interface WalletRow {
  readonly id: string
  readonly account_kind: "client" | "user"
  readonly account_id: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly enforced: boolean
  readonly version: number
  readonly created_at: Date
  readonly updated_at: Date
  readonly due_usd: string
  readonly next_at: Date | null
  readonly next_free_usd: string | null
}

const findWallet = async (pool: pg.Pool, account: Caller["account"]): Promise<WalletRow | undefined> => {
  const { rows } = await pool.query<WalletRow>(FIND_WALLET, [account.id, account.kind])
  return rows[0]
}

/** The service's `Wallet` as it encodes it: amounts parsed and formatted again, available computed. */
const walletBody = (row: WalletRow) => {
  // A grant past its time is out of the budget from expires_at on (D21).
  const budget = new Exact(row.budget_usd).minus(row.due_usd)
  const reserved = new Exact(row.reserved_usd)
  const spent = new Exact(row.spent_usd)
  return {
    id: row.id,
    owner_kind: row.account_kind,
    owner_id: row.account_id,
    currency: "USD",
    budget_usd: formatUsd(budget),
    reserved_usd: formatUsd(reserved),
    spent_usd: formatUsd(spent),
    available_usd: formatUsd(budget.minus(reserved).minus(spent)),
    enforced: row.enforced,
    version: row.version,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    next_expiry: row.next_at === null
      ? null
      : { at: row.next_at.toISOString(), free_usd: formatUsd(new Exact(row.next_free_usd ?? "0")) }
  }
}

export const routes: ReadonlyArray<Route> = [
  {
    method: "GET",
    url: "/developer/account/wallet",
    // As src/Wallets.ts `get`: one read once the wallet exists; only the first read of an account creates it.
    handle: async ({ caller: { account }, pool }) => {
      const found = await findWallet(pool, account)
      if (found !== undefined) return walletBody(found)
      await pool.query(INSERT_WALLET_IF_ABSENT, [account.kind, account.id])
      const created = await findWallet(pool, account)
      if (created === undefined) {
        throw new Error(`the wallet of ${account.kind} ${account.id} vanished after its creation`)
      }
      return walletBody(created)
    }
  }
]
