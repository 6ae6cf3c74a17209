import {
  type CappedField,
  cappedFields,
  catalog,
  ceilingField,
  type DeliveryLevel,
  deliveryRank,
  type FieldName,
  fieldNames,
  fieldOf,
  type FieldValue,
  type Policy,
  type PolicyOverride,
  recordOf,
  type Source
} from "../Domain/PolicyCatalog.js"

/** The rules of the autonomy policy (D4, D5), as pure functions over the catalog. */

export type Sources = { readonly [K in FieldName]: Source }

/** The account's policy as the merge sees it: saved ("account") or the defaults ("default"). */
export interface AccountBase {
  readonly policy: Policy
  readonly source: Exclude<Source, "repository">
}

export interface Effective {
  readonly policy: Policy
  readonly sources: Sources
  readonly capped: ReadonlyArray<CappedField>
}

type MutablePolicy = { -readonly [K in FieldName]: FieldValue<K> }

const assign = <K extends FieldName>(target: MutablePolicy, name: K, value: MutablePolicy[K]) => {
  target[name] = value
}

const lower = <L extends DeliveryLevel>(a: L, b: L): L => deliveryRank(b) < deliveryRank(a) ? b : a

/** The delivery fields that rank above the ceiling of `policy`, in catalog order. */
export const aboveCeiling = (policy: Policy): ReadonlyArray<CappedField> =>
  cappedFields.filter((name) => deliveryRank(policy[name]) > deliveryRank(policy[ceilingField]))

/** The field's highest accepted value that does not rank above `ceiling` (its lowest, if none does). */
const capAt = <K extends CappedField>(name: K, ceiling: DeliveryLevel): MutablePolicy[K] => {
  // TypeScript cannot correlate `catalog[name]` with `K`; the catalog's types make this exact.
  const accepted = catalog[name].accepted as ReadonlyArray<MutablePolicy[K]>
  const lowest = accepted.reduce((a, b) => deliveryRank(b) < deliveryRank(a) ? b : a)
  return accepted.reduce(
    (best, value) =>
      deliveryRank(value) <= deliveryRank(ceiling) && deliveryRank(value) > deliveryRank(best) ? value : best,
    lowest
  )
}

/**
 * The override's fields on top of the account's, with the ceiling the lower of
 * the two; not yet capped. A field a repository may not override keeps the
 * account's value even when the override restates it.
 */
export const merge = (account: AccountBase, override: PolicyOverride): { policy: Policy; sources: Sources } => {
  const policy: MutablePolicy = { ...account.policy }
  const from: { [K in FieldName]: Source } = { ...sourcesOf(account.source) }
  for (const name of fieldNames) {
    const value = override[name]
    if (value !== undefined && fieldOf(name).repositoryOverride) {
      assign(policy, name, value)
      from[name] = "repository"
    }
  }
  const ceiling = lower(account.policy[ceilingField], policy[ceilingField])
  if (ceiling !== policy[ceilingField]) {
    policy[ceilingField] = ceiling
    from[ceilingField] = account.source
  }
  return { policy, sources: from }
}

/** D5: the merge, then the delivery fields capped at its ceiling, so a stricter account ceiling always holds. */
export const effective = (account: AccountBase, override: PolicyOverride | null): Effective => {
  const merged = merge(account, override ?? {})
  const policy: MutablePolicy = { ...merged.policy }
  const capped = aboveCeiling(merged.policy)
  for (const name of capped) assign(policy, name, capAt(name, policy[ceilingField]))
  return { policy, sources: merged.sources, capped }
}

const sourcesOf = (source: Source): Sources => recordOf(() => source)

export interface Violation {
  readonly field: FieldName
  readonly detail: string
}

const tooHigh = (name: CappedField, policy: Policy, inherited: boolean): Violation => ({
  field: name,
  detail: inherited
    ? `the account's ${JSON.stringify(policy[name])} ranks above this repository's autonomy_ceiling ` +
      `${JSON.stringify(policy[ceilingField])}; set ${name} in the override no higher than the ceiling`
    : `must not rank above autonomy_ceiling ${JSON.stringify(policy[ceilingField])}`
})

/** The cross-field rule for a complete (account) policy. */
export const accountViolations = (policy: Policy): ReadonlyArray<Violation> =>
  aboveCeiling(policy).map((name) => tooHigh(name, policy, false))

/**
 * An override may not raise the account's ceiling, and the merged result must
 * keep the cross-field rule (D5). A delivery field the override does not set
 * but inherits too high is reported too: the client fixes it by setting it.
 */
export const overrideViolations = (account: AccountBase, override: PolicyOverride): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const ceiling = override[ceilingField]
  if (ceiling !== undefined && deliveryRank(ceiling) > deliveryRank(account.policy[ceilingField])) {
    violations.push({
      field: ceilingField,
      detail: `must not rank above the account's autonomy_ceiling ${JSON.stringify(account.policy[ceilingField])}`
    })
  }
  const merged = merge(account, override).policy
  for (const name of aboveCeiling(merged)) violations.push(tooHigh(name, merged, override[name] === undefined))
  return violations
}
