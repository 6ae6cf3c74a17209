import { Schema } from "effect"
import { LABEL_KEY } from "./Labels.js"
import * as Money from "./Money.js"
import { SpendLimitRecord } from "./Spend.js"
import { LimitScope } from "./SpendLimit.js"

/**
 * What applies to a session before it starts (D22, docs/decisions/D22-limits-where-people-live.md):
 * the limits a new session of an attribution would be judged by now, what each leaves, and the
 * largest reserve it could take.
 */

/** `labels` as the read's query takes them: `key:value` pairs, comma-separated. */
export const parseLabelQuery = (text: string): Record<string, string> | string => {
  const labels: Record<string, string> = {}
  for (const pair of text.split(",")) {
    const colon = pair.indexOf(":")
    if (colon <= 0) return `must be key:value pairs separated by commas, not ${JSON.stringify(pair)}`
    const key = pair.slice(0, colon)
    if (Object.hasOwn(labels, key)) return `names the key ${JSON.stringify(key)} twice`
    labels[key] = pair.slice(colon + 1)
  }
  return labels
}

const Id = (what: string) =>
  Schema.UUID.annotations({
    description: `The session's ${what}: its id.`,
    message: () => ({ message: `must be a UUID (a ${what}'s id)`, override: true })
  })

/** key:value pairs, comma-separated: each key a label key (Labels.ts), each value not empty and without a comma. */
const LABEL_QUERY = new RegExp(`^${LABEL_KEY.source.slice(1, -1)}:[^,]+(?:,${LABEL_KEY.source.slice(1, -1)}:[^,]+)*$`)

export const EffectiveQuery = Schema.Struct({
  user_id: Schema.optionalWith(Id("user"), { exact: true }),
  repository_id: Schema.optionalWith(Id("repository"), { exact: true }),
  labels: Schema.optionalWith(
    Schema.String.pipe(Schema.pattern(LABEL_QUERY)).annotations({
      description: "The session's labels as key:value pairs, comma-separated (team:infra,env:prod).",
      message: () => ({ message: "must be key:value pairs separated by commas, such as team:infra", override: true })
    }),
    { exact: true }
  )
})
export type EffectiveQuery = typeof EffectiveQuery.Type

/** A limit as it would judge the session: the limit as the GET shows it, with the member it applies as and what it leaves. */
export class EffectiveLimit extends Schema.Class<EffectiveLimit>("EffectiveLimit")({
  ...SpendLimitRecord.fields,
  applies_as: LimitScope.annotations({
    description: "The scope it applies by: an each_ limit's for a member's own use, else its own scope."
  }),
  applies_to: Schema.NullOr(Schema.String).annotations({
    description: "The member an each_ limit applies to here (a user's or repository's id, a label's key=value)."
  }),
  remaining_usd: Schema.NullOr(Money.Usd).annotations({
    description: "What the limit leaves (effective_amount_usd less used_usd, at least 0); null for a concurrent limit."
  })
}) {}

export class EffectiveLimits extends Schema.Class<EffectiveLimits>("EffectiveLimits")({
  timezone: Schema.String.annotations({ description: "The account's time zone, its periods'." }),
  limits: Schema.Array(EffectiveLimit),
  funds_usd: Schema.NullOr(Money.Usd).annotations({
    description: "What the wallet could hold now (its available balance); null when the wallet is not enforced."
  }),
  max_reservable_usd: Schema.NullOr(Money.Usd).annotations({
    description: "The largest reserve a new session so attributed could take now: the number a refusal would " +
      "carry; null when nothing bounds it."
  })
}) {}
