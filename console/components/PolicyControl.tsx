import type { AccountApiClient } from "@account-api/client/web"

export type Capabilities = Awaited<ReturnType<AccountApiClient["getCapabilities"]>>
export type FieldCapability = Capabilities["policy"][keyof Capabilities["policy"]]
export type PolicyValue = FieldCapability["values"][number]["value"]
type ValueCapability = FieldCapability["values"][number]

/** `force_push` as "Force push": the field's name is its label, so no list of labels is kept here. */
export const fieldLabel = (name: string): string => {
  const words = name.replace(/_/g, " ")
  return `${words.charAt(0).toUpperCase()}${words.slice(1)}`
}

/** Why a value cannot be chosen, from the capabilities read (D4); undefined when it can. */
export const reasonOf = (value: ValueCapability): string | undefined =>
  !value.accepted
    ? "Not accepted by the service"
    : !value.effective
    ? "Accepted and stored, but has no effect yet"
    : undefined

/** A policy field's value from a policy or an override object, by the field's name. */
export const valueIn = (policy: object, name: string): PolicyValue | undefined => {
  const entry = Object.entries(policy).find(([key]) => key === name)
  const value: unknown = entry?.[1]
  return typeof value === "string" || typeof value === "boolean" ? value : undefined
}

/**
 * One policy field as a group of choices, built from its capability (D4): every value the
 * service lists, in its order; one accepted but not effective (or not accepted) is disabled with
 * the reason beside it. `inherit` adds the choice a repository's override has of not setting the
 * field; `locked` disables the whole field with its reason.
 */
export const PolicyControl = (
  { name, capability, value, onChange, inherit, locked, error }: {
    readonly name: string
    readonly capability: FieldCapability
    /** undefined: not set (inherits). */
    readonly value: PolicyValue | undefined
    readonly onChange: (value: PolicyValue | undefined) => void
    readonly inherit?: string | undefined
    readonly locked?: string | undefined
    readonly error?: string | undefined
  }
) => {
  const id = `policy-${name}`
  const hint = `Default: ${String(capability.default)}.${locked === undefined ? "" : ` ${locked}.`}`
  return (
    <fieldset
      class="policy-field"
      aria-describedby={error === undefined ? `${id}-hint` : `${id}-hint ${id}-error`}
      aria-invalid={error === undefined ? undefined : "true"}
    >
      <legend>{fieldLabel(name)}</legend>
      <p id={`${id}-hint`} class="field-hint">{hint}</p>
      {inherit !== undefined && (
        <div class="choice">
          <input
            type="radio"
            id={`${id}-inherit`}
            name={id}
            checked={value === undefined}
            disabled={locked !== undefined}
            onChange={() => onChange(undefined)}
          />
          <label for={`${id}-inherit`}>{inherit}</label>
        </div>
      )}
      {capability.values.map((option, index) => {
        const reason = reasonOf(option)
        const optionId = `${id}-${index}`
        return (
          <div class="choice" key={String(option.value)}>
            <input
              type="radio"
              id={optionId}
              name={id}
              checked={value === option.value}
              disabled={locked !== undefined || reason !== undefined}
              aria-describedby={reason === undefined ? undefined : `${optionId}-reason`}
              onChange={() => onChange(option.value)}
            />
            <label for={optionId}>{String(option.value)}</label>
            {reason !== undefined && <span id={`${optionId}-reason`} class="reason">{reason}</span>}
          </div>
        )
      })}
      {error !== undefined && <p id={`${id}-error`} class="field-error">{error}</p>}
    </fieldset>
  )
}
