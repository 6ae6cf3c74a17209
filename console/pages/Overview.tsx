import { ProblemBanner } from "../components/ProblemBanner.js"
import { WalletCard } from "../components/WalletCard.js"
import { useLoad } from "../session.js"

/** What every member sees first: the wallet, the sessions running now, this month's spend, the limits, recent events. */
export const Overview = () => {
  const wallet = useLoad((api) => api.getWallet(), [])
  return (
    <>
      <h1>Overview</h1>
      <ProblemBanner problem={wallet.problem} retryInSeconds={wallet.retryInSeconds} onRetry={wallet.reload} />
      {wallet.data !== undefined && <WalletCard wallet={wallet.data} />}
    </>
  )
}
