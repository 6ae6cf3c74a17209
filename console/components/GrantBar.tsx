import { formatUsd, micros } from "../format.js"
import type { Grant } from "../grants.js"
import { Money } from "./Money.js"

/** A grant's four parts (D21: amount = drawn + held + free + ended), in the bar's order. */
const PARTS = [
  { field: "drawn_usd", label: "Drawn", colour: "#5c6670" },
  { field: "held_usd", label: "Held", colour: "#a15c00" },
  { field: "free_usd", label: "Free", colour: "#1e7d32" },
  { field: "ended_usd", label: "Ended", colour: "#b3261e" }
] as const

/**
 * A grant's amount as one bar of what was drawn (spent from it), is held (earmarked by open
 * sessions), is free and has ended (expired or voided), drawn as SVG: the lengths are the amounts'
 * whole micro-dollars (`micros`, exact) in a drawing as wide as the grant, which the browser
 * scales. The drawing is one picture to a screen reader (hidden); the four amounts are written
 * beside it, each with its colour's swatch, so nothing is told by colour alone.
 */
export const GrantBar = ({ grant }: { readonly grant: Grant }) => {
  const width = micros(grant.amount_usd)
  let start = 0n
  const segments = PARTS.map((part) => {
    const size = micros(grant[part.field])
    const x = start
    start += size
    return size <= 0n ?
      null :
      (
        <rect key={part.field} x={x.toString()} y="0" width={size.toString()} height="1" fill={part.colour}>
          <title>{`${part.label}: ${formatUsd(grant[part.field])}`}</title>
        </rect>
      )
  })
  return (
    <div class="grant-bar">
      <svg
        class="grant-bar-drawing"
        viewBox={`0 0 ${(width > 0n ? width : 1n).toString()} 1`}
        preserveAspectRatio="none"
        aria-hidden="true"
        focusable="false"
      >
        {segments}
      </svg>
      <dl class="grant-parts">
        {PARTS.map((part) => (
          <div key={part.field} class="grant-part" data-part={part.field}>
            <dt>
              <svg class="swatch" viewBox="0 0 1 1" aria-hidden="true" focusable="false">
                <rect width="1" height="1" fill={part.colour} />
              </svg>
              {part.label}
            </dt>
            <dd>
              <Money value={grant[part.field]} />
            </dd>
          </div>
        ))}
      </dl>
    </div>
  )
}
