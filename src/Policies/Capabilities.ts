import { Schema } from "effect"
import { type AnyField, fieldOf, listedValues, recordOf } from "../Domain/PolicyCatalog.js"

/** The capability matrix (D4): what clients enable, disable and default, read from the catalog. */

export interface ValueCapability {
  readonly value: string | boolean
  readonly accepted: boolean
  readonly effective: boolean
}

export interface FieldCapability {
  readonly type: "enum" | "boolean"
  readonly default: string | boolean
  readonly repository_override: boolean
  readonly values: ReadonlyArray<ValueCapability>
}

/** Per field, so the OpenAPI document names each field's own values. */
const fieldCapabilitySchema = (field: AnyField): Schema.Schema<FieldCapability> =>
  Schema.Struct({
    type: Schema.Literal(field.type),
    default: Schema.Literal(field.default),
    repository_override: Schema.Boolean,
    values: Schema.Array(Schema.Struct({
      value: Schema.Literal(...listedValues(field)),
      accepted: Schema.Boolean.annotations({ description: "Stored when sent; when false, sending it is 422." }),
      effective: Schema.Boolean.annotations({ description: "Takes effect today; when false, show it disabled." })
    }))
  }) as unknown as Schema.Schema<FieldCapability>

export const WalletCapabilities = Schema.Struct({
  enforcement: Schema.Boolean,
  credits_require_admin: Schema.Boolean,
  payment_provider: Schema.Null
}).annotations({ identifier: "WalletCapabilities" })

export const Capabilities = Schema.Struct({
  policy: Schema.Struct(
    recordOf((name) => fieldCapabilitySchema(fieldOf(name)))
  ).annotations({ identifier: "PolicyCapabilities", description: "Every policy field, in catalog order." }),
  wallet: WalletCapabilities
}).annotations({ identifier: "Capabilities" })
export type Capabilities = typeof Capabilities.Type

const fieldCapability = (field: AnyField): FieldCapability => ({
  type: field.type,
  default: field.default,
  repository_override: field.repositoryOverride,
  values: listedValues(field).map((value) => ({
    value,
    accepted: field.accepted.some((accepted) => accepted === value),
    effective: field.effective.some((effective) => effective === value)
  }))
})

export const capabilities: Capabilities = {
  policy: recordOf((name) => fieldCapability(fieldOf(name))),
  // Budgets are enforced once set (D6); credits are an administrative action with no payment integration.
  wallet: { enforcement: true, credits_require_admin: true, payment_provider: null }
}
