import { Schema } from "effect"

/**
 * The policy catalog (D4): the single source of truth for the twelve policy
 * fields. Request validation, the version-0 defaults, the capabilities read and
 * the OpenAPI document are all derived from it, so accepting a new value is a
 * change to one `accepted` list (and to `effective` once it takes effect).
 */

/** Delivery levels, least autonomous first; the cross-field rule compares their ranks. */
export const deliveryLevels = ["preserve_only", "draft_pr", "pull_request"] as const
export type DeliveryLevel = typeof deliveryLevels[number]

export const deliveryRank = (level: DeliveryLevel): number => deliveryLevels.indexOf(level)

type NonEmpty<A> = readonly [A, ...Array<A>]

export interface EnumField<V extends string> {
  readonly type: "enum"
  /** Stored when sent, in the order clients list them. */
  readonly accepted: NonEmpty<V>
  /** The accepted values that take effect today; the rest are stored but shown disabled. */
  readonly effective: ReadonlyArray<V>
  readonly default: V
  readonly repositoryOverride: boolean
}

export interface BooleanField<V extends boolean> {
  readonly type: "boolean"
  readonly accepted: NonEmpty<V>
  readonly effective: ReadonlyArray<V>
  readonly default: V
  readonly repositoryOverride: boolean
}

interface FieldOptions<V> {
  readonly accepted: NonEmpty<V>
  readonly effective: ReadonlyArray<NoInfer<V>>
  readonly default: NoInfer<V>
  readonly repositoryOverride?: boolean
}

const enumField = <const V extends string>(options: FieldOptions<V>): EnumField<V> => ({
  type: "enum",
  accepted: options.accepted,
  effective: options.effective,
  default: options.default,
  repositoryOverride: options.repositoryOverride ?? true
})

/** A field whose values are delivery levels, so the cross-field rule can rank them. */
const deliveryField = <const V extends DeliveryLevel>(options: FieldOptions<V>): EnumField<V> => enumField(options)

const booleanField = <const V extends boolean>(options: FieldOptions<V>): BooleanField<V> => ({
  type: "boolean",
  accepted: options.accepted,
  effective: options.effective,
  default: options.default,
  repositoryOverride: options.repositoryOverride ?? true
})

/** In D4's table order, which is the order of every response that lists the fields. */
export const catalog = {
  force_push: enumField({ accepted: ["ask", "deny", "allow"], effective: ["ask", "deny"], default: "ask" }),
  // A repository may not relax it; an override may restate it only as `true` (D5).
  run_tests_before_claim: booleanField({
    accepted: [true],
    effective: [true],
    default: true,
    repositoryOverride: false
  }),
  package_installs: enumField({ accepted: ["ask", "allow", "deny"], effective: ["ask", "allow"], default: "ask" }),
  network: enumField({ accepted: ["ask", "allow", "deny"], effective: ["ask"], default: "ask" }),
  destructive_actions: enumField({ accepted: ["ask", "deny"], effective: ["ask"], default: "ask" }),
  production_credentials: enumField({ accepted: ["deny", "ask"], effective: ["deny"], default: "deny" }),
  delivery_mode: deliveryField({
    accepted: ["preserve_only", "draft_pr", "pull_request"],
    effective: ["preserve_only", "draft_pr"],
    default: "preserve_only"
  }),
  unverified_delivery: deliveryField({
    accepted: ["preserve_only", "draft_pr"],
    effective: ["preserve_only"],
    default: "preserve_only"
  }),
  deployment: enumField({ accepted: ["deny", "ask"], effective: ["deny"], default: "deny" }),
  autonomy_ceiling: deliveryField({
    accepted: ["preserve_only", "draft_pr", "pull_request"],
    effective: ["preserve_only", "draft_pr"],
    default: "draft_pr"
  }),
  nightly_backlog_sweep: booleanField({ accepted: [false, true], effective: [false], default: false }),
  show_execution_rationale: booleanField({ accepted: [true, false], effective: [true, false], default: true })
} as const

export type Catalog = typeof catalog
export type FieldName = keyof Catalog
export type FieldValue<K extends FieldName> = Catalog[K]["accepted"][number]
export type AnyField = EnumField<string> | BooleanField<boolean>

export const fieldNames = Object.keys(catalog) as ReadonlyArray<FieldName>

export const fieldOf = (name: FieldName): AnyField => catalog[name]

/** The cross-field rule (D4): these may not rank above the ceiling, and are capped at it (D5). */
export const ceilingField = "autonomy_ceiling" satisfies FieldName
export const cappedFields = ["delivery_mode", "unverified_delivery"] as const satisfies ReadonlyArray<FieldName>
export type CappedField = typeof cappedFields[number]

/** Every value a client is shown: the accepted ones in order, then (booleans) the one that is refused. */
export const listedValues = (field: AnyField): ReadonlyArray<string | boolean> =>
  field.type === "boolean"
    ? [...field.accepted, ...[true, false].filter((value) => !field.accepted.includes(value))]
    : field.accepted

const quoted = (values: ReadonlyArray<string | boolean>) => values.map((value) => JSON.stringify(value)).join(", ")

const valueSchema = <K extends FieldName>(name: K): Schema.Schema<FieldValue<K>> => {
  const field = fieldOf(name)
  const overridable = field.repositoryOverride
    ? ""
    : " A repository override may restate it but never changes it."
  return Schema.Literal(...field.accepted).annotations({
    // `override`: one message for the field, not one per rejected alternative.
    message: () => ({
      message: field.accepted.length === 1
        ? `must be ${quoted(field.accepted)}`
        : `must be one of ${quoted(field.accepted)}`,
      override: true
    }),
    description: `Accepted: ${quoted(field.accepted)}. Takes effect today: ${quoted(field.effective)}` +
      (field.effective.length < field.accepted.length ? " (the others are stored but have no effect yet)" : "") +
      `. Default: ${quoted([field.default])}.${overridable}`
  }) as unknown as Schema.Schema<FieldValue<K>>
}

/** One entry per field, in catalog order. */
export const recordOf = <A>(make: (name: FieldName) => A): { readonly [K in FieldName]: A } =>
  Object.fromEntries(fieldNames.map((name) => [name, make(name)])) as { readonly [K in FieldName]: A }

/** The complete policy: all twelve fields, each one of its accepted values. */
export const Policy = Schema.Struct(
  recordOf(valueSchema) as { readonly [K in FieldName]: Schema.Schema<FieldValue<K>> }
).annotations({ identifier: "Policy", description: "All twelve policy fields." })
export type Policy = typeof Policy.Type

/** A repository override: some of the fields (possibly none), with the same values. */
export const PolicyOverride = Schema.Struct(
  recordOf((name) => Schema.optionalWith(valueSchema(name), { exact: true })) as {
    readonly [K in FieldName]: Schema.optionalWith<Schema.Schema<FieldValue<K>>, { readonly exact: true }>
  }
).annotations({ identifier: "PolicyOverride", description: "Only the fields this repository changes." })
export type PolicyOverride = typeof PolicyOverride.Type

/** What applies while nothing is saved (version 0). Decoded, so a default outside `accepted` fails at start-up. */
export const defaults: Policy = Schema.decodeUnknownSync(Policy)(recordOf((name) => catalog[name].default))

/** Where an effective field comes from (D5). */
export type Source = "default" | "account" | "repository"
export const sources = ["default", "account", "repository"] as const satisfies ReadonlyArray<Source>
