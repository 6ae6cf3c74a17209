import { formatUsd, isNegative } from "../format.js"

/** An amount as the API sent it (a decimal string), shown as dollars; the exact value in the title. */
export const Money = ({ value }: { readonly value: string }) => (
  <span class={isNegative(value) ? "money negative" : "money"} title={`${value} USD`}>{formatUsd(value)}</span>
)
