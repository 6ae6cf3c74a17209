import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { formatTime, shortId } from "../format.js"
import { useAction, useLoad } from "../session.js"
import { DataTable } from "./DataTable.js"
import { EventTypesField } from "./EventTypesField.js"
import { Field } from "./Field.js"
import { ProblemBanner } from "./ProblemBanner.js"

export type Endpoint = Awaited<ReturnType<AccountApiClient["listWebhooks"]>>["endpoints"][number]

interface EndpointEdit {
  readonly url: string
  readonly description: string
  readonly types: ReadonlyArray<string>
}

/** How many of an endpoint's newest delivery attempts are listed. */
const DELIVERIES_LISTED = 20

const Deliveries = (
  { endpoint, onRedeliver }: { readonly endpoint: Endpoint; readonly onRedeliver: (id: string) => void }
) => {
  const deliveries = useLoad((api) => api.listWebhookDeliveries(endpoint.id, { limit: DELIVERIES_LISTED }), [])
  return (
    <>
      <ProblemBanner
        problem={deliveries.problem}
        retryInSeconds={deliveries.retryInSeconds}
        onRetry={deliveries.reload}
      />
      {deliveries.data !== undefined && (
        <DataTable
          caption={`Delivery attempts to ${endpoint.url}, newest first`}
          rows={deliveries.data.deliveries}
          rowKey={(delivery) => delivery.id}
          empty="No delivery attempts yet."
          columns={[
            { header: "When", cell: (delivery) => formatTime(delivery.attempted_at) },
            { header: "Event", cell: (delivery) => <span title={delivery.event_id}>{delivery.event_type}</span> },
            { header: "Attempt", cell: (delivery) => delivery.attempt, numeric: true },
            { header: "Outcome", cell: (delivery) => delivery.outcome },
            { header: "Status", cell: (delivery) => delivery.status_code ?? "none", numeric: true },
            { header: "Took", cell: (delivery) => `${delivery.duration_ms} ms`, numeric: true },
            { header: "Error", cell: (delivery) => <span class="note">{delivery.error ?? ""}</span> },
            {
              header: "Next attempt",
              cell: (delivery) => delivery.next_attempt_at === null ? "" : formatTime(delivery.next_attempt_at)
            },
            {
              header: "Again",
              cell: (delivery) => (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => onRedeliver(delivery.event_id)}
                >
                  Redeliver event {shortId(delivery.event_id)}
                </button>
              )
            }
          ]}
        />
      )}
    </>
  )
}

/**
 * One webhook endpoint (D17): what it is, and an administrator's actions on it: edit its url,
 * types and description, disable or enable it, rotate its secret (the new one is shown once by
 * the page), list its deliveries and redeliver an event, delete it (asked twice).
 */
export const WebhookEndpointCard = (
  { endpoint, onChanged, onSecret, onRedeliver }: {
    readonly endpoint: Endpoint
    /** After a change: the page reads the list again. */
    readonly onChanged: () => void
    readonly onSecret: (secret: string) => void
    readonly onRedeliver: (eventId: string) => void
  }
) => {
  const [editing, setEditing] = useState<EndpointEdit | undefined>(undefined)
  const [showDeliveries, setShowDeliveries] = useState(false)
  const [confirmDelete, setConfirmDelete] = useState(false)
  const update = useAction((api, body: Parameters<AccountApiClient["updateWebhook"]>[1]) =>
    api.updateWebhook(endpoint.id, body)
  )
  const rotate = useAction((api, _: null) => api.rotateWebhookSecret(endpoint.id))
  const remove = useAction((api, _: null) => api.deleteWebhook(endpoint.id).then(() => true))
  const problem = update.problem ?? rotate.problem ?? remove.problem
  const heading = `endpoint-${endpoint.id}`
  const thenChanged = (done: unknown) => {
    if (done !== undefined) onChanged()
  }

  const saveEdit = async (edit: EndpointEdit) => {
    const done = await update.run({
      url: edit.url,
      description: edit.description === "" ? null : edit.description,
      types: edit.types.length === 0 ? null : edit.types
    })
    if (done !== undefined) {
      setEditing(undefined)
      onChanged()
    }
  }

  return (
    <article class="card webhook" aria-labelledby={heading}>
      <h3 id={heading} class="webhook-url">{endpoint.url}</h3>
      <p class="note">{endpoint.description ?? ""}</p>
      <p>
        {endpoint.enabled
          ? "Enabled"
          : `Disabled${endpoint.disabled_reason === null ? "" : `: ${endpoint.disabled_reason}`}`}
        {" · "}
        {endpoint.types === null ? "every event type" : endpoint.types.join(", ")}
        {" · "}
        <span title={endpoint.id}>id {shortId(endpoint.id)}</span>
      </p>
      <ProblemBanner problem={problem} />
      {editing === undefined
        ? (
          <div class="actions">
            <button
              type="button"
              class="secondary"
              onClick={() =>
                setEditing({ url: endpoint.url, description: endpoint.description ?? "", types: endpoint.types ?? [] })}
            >
              Edit
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() => void update.run({ enabled: !endpoint.enabled }).then(thenChanged)}
            >
              {endpoint.enabled ? "Disable" : "Enable"}
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() =>
                void rotate.run(null).then((rotated) => {
                  if (rotated !== undefined) onSecret(rotated.secret)
                })}
            >
              Rotate the secret
            </button>
            <button
              type="button"
              class="secondary"
              aria-expanded={showDeliveries}
              onClick={() => setShowDeliveries(!showDeliveries)}
            >
              {showDeliveries ? "Hide deliveries" : "Deliveries"}
            </button>
            {confirmDelete
              ? (
                <button type="button" onClick={() => void remove.run(null).then(thenChanged)}>
                  Really delete this endpoint
                </button>
              )
              : <button type="button" class="secondary" onClick={() => setConfirmDelete(true)}>Delete</button>}
          </div>
        )
        : (
          <form
            onSubmit={(event) => {
              event.preventDefault()
              void saveEdit(editing)
            }}
          >
            <Field
              id={`${heading}-url`}
              label="URL"
              type="url"
              value={editing.url}
              onValue={(url) => setEditing({ ...editing, url })}
              error={update.errors["url"]}
              required
            />
            <Field
              id={`${heading}-description`}
              label="Description (optional)"
              value={editing.description}
              onValue={(description) => setEditing({ ...editing, description })}
              error={update.errors["description"]}
            />
            <EventTypesField
              id={`${heading}-types`}
              chosen={editing.types}
              onChange={(types) => setEditing({ ...editing, types })}
              error={update.errors["types"]}
            />
            <div class="actions">
              <button type="submit" disabled={update.pending}>Save the endpoint</button>
              <button type="button" class="secondary" onClick={() => setEditing(undefined)}>Cancel</button>
            </div>
          </form>
        )}
      {showDeliveries && <Deliveries endpoint={endpoint} onRedeliver={onRedeliver} />}
    </article>
  )
}
