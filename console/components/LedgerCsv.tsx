import type { AccountApiError } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { asProblem, useSignedIn } from "../session.js"
import { ProblemBanner } from "./ProblemBanner.js"

/**
 * Downloads the ledger's CSV export (D13) for a window: read with the client (the export needs
 * the bearer token, which a plain link cannot send), then saved from memory as a file.
 */
export const LedgerCsv = (
  { from, to, label = "Download the ledger as CSV" }: {
    readonly from?: string | undefined
    readonly to?: string | undefined
    readonly label?: string
  }
) => {
  const signedIn = useSignedIn()
  const [pending, setPending] = useState(false)
  const [problem, setProblem] = useState<AccountApiError | undefined>(undefined)
  const download = async () => {
    setPending(true)
    setProblem(undefined)
    try {
      const chunks: Array<string> = []
      await signedIn.call(async (api) => {
        for await (
          const chunk of api.exportLedger({
            ...(from === undefined ? {} : { from }),
            ...(to === undefined ? {} : { to })
          })
        ) {
          chunks.push(chunk)
        }
      })
      const url = URL.createObjectURL(new Blob(chunks, { type: "text/csv" }))
      const link = document.createElement("a")
      link.href = url
      link.download = `ledger${from === undefined ? "" : `-${from.slice(0, 10)}`}${
        to === undefined ? "" : `-${to.slice(0, 10)}`
      }.csv`
      link.click()
      URL.revokeObjectURL(url)
    } catch (error) {
      setProblem(asProblem(error))
    } finally {
      setPending(false)
    }
  }
  return (
    <div class="csv">
      <button type="button" class="secondary" disabled={pending} onClick={() => void download()}>
        {pending ? "Preparing the CSV…" : label}
      </button>
      <ProblemBanner problem={problem} onRetry={() => void download()} />
    </div>
  )
}
