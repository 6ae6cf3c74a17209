import type { AccountApiClient } from "@account-api/client/web"
import { Money } from "./Money.js"

type Wallet = Awaited<ReturnType<AccountApiClient["getWallet"]>>

/** The wallet, `available_usd` first (the seed's order), then what it is made of and whether it is enforced. */
export const WalletCard = ({ wallet }: { readonly wallet: Wallet }) => (
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
    </dl>
  </section>
)
