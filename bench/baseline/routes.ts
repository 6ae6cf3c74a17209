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
 * The texts of src/Wallets/Repo.ts `findWallet` and `insertWalletIfAbsent`, as
 * the service sends them (whitespace included), so PostgreSQL does the same work
 * for both servers.
 */
const FIND_WALLET = `SELECT id, account_kind, account_id, budget_usd, reserved_usd, spent_usd, enforced, version,
      last_sequence, created_at, updated_at FROM wallets WHERE account_id = $1 AND account_kind = $2`
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
}

const findWallet = async (pool: pg.Pool, account: Caller["account"]): Promise<WalletRow | undefined> => {
  const { rows } = await pool.query<WalletRow>(FIND_WALLET, [account.id, account.kind])
  return rows[0]
}

/** The service's `Wallet` as it encodes it: amounts parsed and formatted again, available computed. */
const walletBody = (row: WalletRow) => {
  const budget = new Exact(row.budget_usd)
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
    updated_at: row.updated_at.toISOString()
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
