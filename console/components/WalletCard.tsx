import type { AccountApiClient } from "@account-api/client/web"
import { formatLocalTime } from "../format.js"
import { Money } from "./Money.js"

type Wallet = Awaited<ReturnType<AccountApiClient["getWallet"]>>
export type NextExpiry = Wallet["next_expiry"]

/** What expires next (D21), in words: "$12.00 expires on 31 Dec 2026, 23:59 UTC", in the browser's zone. */
export const NextExpiryWords = ({ next }: { readonly next: NextExpiry }) =>
  next === null ? <>No credit is set to expire</> : (
    <>
      <Money value={next.free_usd} /> expires on <time dateTime={next.at}>{formatLocalTime(next.at)}</time>
    </>
  )

/**
 * The wallet, `available_usd` first (the seed's order), then what it is made of, whether it is
 * enforced and what credit expires next (D21's `next_expiry`; left out where the wallet came from
 * a write, which does not carry it).
 */
export const WalletCard = (
  { wallet }: { readonly wallet: Omit<Wallet, "next_expiry"> & { readonly next_expiry?: NextExpiry } }
) => (
  <section class="card wallet" aria-labelledby="wallet-title">
    <h2 id="wallet-title">Wallet</h2>
    <dl class="figures">
      <div class="figure figure-main">
        <dt>Available</dt>
        <dd data-field="available_usd">
          <Money value={wallet.available_usd} />
        </dd>
      </div>
      <div class="figure">
        <dt>Budget</dt>
        <dd data-field="budget_usd">
          <Money value={wallet.budget_usd} />
        </dd>
      </div>
      <div class="figure">
        <dt>Held by open sessions</dt>
        <dd data-field="reserved_usd">
          <Money value={wallet.reserved_usd} />
        </dd>
      </div>
      <div class="figure">
        <dt>Spent</dt>
        <dd data-field="spent_usd">
          <Money value={wallet.spent_usd} />
        </dd>
      </div>
      <div class="figure">
        <dt>Enforcement</dt>
        <dd data-field="enforced">
          {wallet.enforced
            ? "Enforced: sessions cannot hold more than is available"
            : "Not enforced: no budget set yet, sessions are not held to one"}
        </dd>
      </div>
      {wallet.next_expiry !== undefined && (
        <div class="figure">
          <dt>Next to expire</dt>
          <dd data-field="next_expiry">
            <NextExpiryWords next={wallet.next_expiry} /> <a href="#/grants">See the grants</a>
          </dd>
        </div>
      )}
    </dl>
  </section>
)
