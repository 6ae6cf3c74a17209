import { EVENT_TYPES } from "@account-api/client/web"

/**
 * The event types a webhook endpoint receives, one checkbox per type of the catalog the client
 * package exports; none checked means every type (the service's `types: null`).
 */
export const EventTypesField = (
  { id, chosen, onChange, error }: {
    readonly id: string
    readonly chosen: ReadonlyArray<string>
    readonly onChange: (types: ReadonlyArray<string>) => void
    readonly error?: string | undefined
  }
) => (
  <fieldset class="event-types" aria-describedby={error === undefined ? undefined : `${id}-error`}>
    <legend>Event types (none checked: every type)</legend>
    {EVENT_TYPES.map((type) => (
      <div class="choice" key={type}>
        <input
          type="checkbox"
          id={`${id}-${type}`}
          checked={chosen.includes(type)}
          onChange={(event) =>
            onChange(event.currentTarget.checked ? [...chosen, type] : chosen.filter((other) => other !== type))}
        />
        <label for={`${id}-${type}`}>{type}</label>
      </div>
    ))}
    {error !== undefined && <p id={`${id}-error`} class="field-error">{error}</p>}
  </fieldset>
)
