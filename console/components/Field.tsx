/**
 * A labelled input with its own error beside it (a 422's problem for this field, by name from
 * `fieldErrors`): the error is announced with the field (`aria-describedby`) and marks it invalid.
 * Amounts are typed as text with a decimal keypad: the console keeps them as strings.
 */
export const Field = (
  { id, label, value, onValue, error, hint, type = "text", inputMode, autocomplete, required, disabled }: {
    readonly id: string
    readonly label: string
    readonly value: string
    readonly onValue: (value: string) => void
    readonly error?: string | undefined
    readonly hint?: string | undefined
    readonly type?: "text" | "email" | "password" | "url" | "date" | "datetime-local" | "search"
    readonly inputMode?: "decimal" | "numeric" | "text" | "email" | "url"
    readonly autocomplete?: string
    readonly required?: boolean
    readonly disabled?: boolean
  }
) => {
  const described = [hint === undefined ? "" : `${id}-hint`, error === undefined ? "" : `${id}-error`]
    .filter((part) => part !== "").join(" ")
  const common = {
    id,
    name: id,
    value,
    inputMode,
    autocomplete,
    required,
    disabled,
    "aria-invalid": error === undefined ? undefined : "true" as const,
    "aria-describedby": described === "" ? undefined : described,
    onInput: (event: { readonly currentTarget: HTMLInputElement }) => onValue(event.currentTarget.value)
  }
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint !== undefined && <p id={`${id}-hint`} class="field-hint">{hint}</p>}
      {type === "password"
        ? <input type="password" {...common} />
        : type === "date"
        ? <input type="date" {...common} />
        : type === "datetime-local"
        ? <input type="datetime-local" {...common} />
        // `list` undefined: the one shape Preact's types give text-like inputs of any of these types.
        : <input type={type} list={undefined} {...common} />}
      {error !== undefined && <p id={`${id}-error`} class="field-error">{error}</p>}
    </div>
  )
}

/** A labelled choice among options (value and label each); a disabled option may say why in its label. */
export const SelectField = <V extends string>(
  { id, label, value, options, onChange, error, hint }: {
    readonly id: string
    readonly label: string
    readonly value: V
    readonly options: ReadonlyArray<{ readonly value: V; readonly label: string; readonly disabled?: boolean }>
    readonly onChange: (value: V) => void
    readonly error?: string | undefined
    readonly hint?: string | undefined
  }
) => {
  const described = [hint === undefined ? "" : `${id}-hint`, error === undefined ? "" : `${id}-error`]
    .filter((part) => part !== "").join(" ")
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint !== undefined && <p id={`${id}-hint`} class="field-hint">{hint}</p>}
      <select
        id={id}
        name={id}
        value={value}
        aria-invalid={error === undefined ? undefined : "true"}
        aria-describedby={described === "" ? undefined : described}
        onChange={(event) => {
          const chosen = options.find((option) => option.value === event.currentTarget.value)
          if (chosen !== undefined) onChange(chosen.value)
        }}
      >
        {options.map((option) => (
          <option key={option.value} value={option.value} disabled={option.disabled === true}>{option.label}</option>
        ))}
      </select>
      {error !== undefined && <p id={`${id}-error`} class="field-error">{error}</p>}
    </div>
  )
}
