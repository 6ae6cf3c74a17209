import { useState } from "preact/hooks"
import { EventTypesField } from "../components/EventTypesField.js"
import { Field } from "../components/Field.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { SecretDialog } from "../components/SecretDialog.js"
import { WebhookEndpointCard } from "../components/WebhookEndpointCard.js"
import { useAction, useLoad, useSignedIn } from "../session.js"

interface NewEndpoint {
  readonly url: string
  readonly description: string
  readonly types: ReadonlyArray<string>
}

const EMPTY: NewEndpoint = { url: "", description: "", types: [] }

/**
 * Webhook endpoints (D17, administrators only): register one (its secret is shown once, in a
 * dialog with a copy button, and held nowhere after it closes), and each one's changes,
 * deliveries and redelivery (components/WebhookEndpointCard.tsx).
 */
export const Webhooks = () => {
  const signedIn = useSignedIn()
  const [round, setRound] = useState(0)
  const endpoints = useLoad((api) => api.listWebhooks(), [round])
  const [form, setForm] = useState<NewEndpoint>(EMPTY)
  const [secret, setSecret] = useState<{ readonly title: string; readonly secret: string } | undefined>(undefined)
  const [eventId, setEventId] = useState("")
  const [redelivered, setRedelivered] = useState<string | undefined>(undefined)
  const create = useAction((api, body: NewEndpoint) =>
    api.createWebhook({
      url: body.url,
      ...(body.description === "" ? {} : { description: body.description }),
      ...(body.types.length === 0 ? {} : { types: body.types })
    })
  )
  const redeliver = useAction((api, id: string) => api.redeliverEvent(id))
  const reload = () => setRound((n) => n + 1)

  const redeliverEvent = async (id: string) => {
    setRedelivered(undefined)
    const done = await redeliver.run(id)
    if (done !== undefined) {
      setRedelivered(`Event ${done.event_id} queued again to ${done.endpoints} endpoint(s).`)
      reload()
    }
  }

  if (!signedIn.isAdmin) {
    return (
      <>
        <h1>Webhooks</h1>
        <p>Webhook endpoints are for the account's administrators. Ask one of them to change them.</p>
      </>
    )
  }
  return (
    <>
      <h1>Webhooks</h1>
      {secret !== undefined && (
        <SecretDialog
          title={secret.title}
          secret={secret.secret}
          onClose={() => setSecret(undefined)}
        />
      )}
      <section class="card" aria-labelledby="webhook-new-title">
        <h2 id="webhook-new-title">Add an endpoint</h2>
        <ProblemBanner problem={create.problem} />
        <form
          onSubmit={(event) => {
            event.preventDefault()
            void create.run(form).then((made) => {
              if (made === undefined) return
              setForm(EMPTY)
              setSecret({ title: `The secret of ${made.url}`, secret: made.secret })
              reload()
            })
          }}
        >
          <Field
            id="webhook-url"
            label="URL"
            type="url"
            hint="https; the service posts each event there, signed"
            value={form.url}
            onValue={(url) => setForm({ ...form, url })}
            error={create.errors["url"]}
            required
          />
          <Field
            id="webhook-description"
            label="Description (optional)"
            value={form.description}
            onValue={(description) => setForm({ ...form, description })}
            error={create.errors["description"]}
          />
          <EventTypesField
            id="webhook-types"
            chosen={form.types}
            onChange={(types) => setForm({ ...form, types })}
            error={create.errors["types"]}
          />
          <div class="actions">
            <button type="submit" disabled={create.pending}>Add the endpoint</button>
          </div>
        </form>
      </section>
      <section aria-labelledby="webhook-list-title">
        <h2 id="webhook-list-title">Endpoints</h2>
        <ProblemBanner
          problem={endpoints.problem}
          retryInSeconds={endpoints.retryInSeconds}
          onRetry={endpoints.reload}
        />
        {endpoints.data?.endpoints.length === 0 && <p>No endpoints yet.</p>}
        {endpoints.data?.endpoints.map((endpoint) => (
          <WebhookEndpointCard
            key={`${endpoint.id}-${endpoint.updated_at}`}
            endpoint={endpoint}
            onChanged={reload}
            onSecret={(rotated) => setSecret({ title: `The new secret of ${endpoint.url}`, secret: rotated })}
            onRedeliver={(id) => void redeliverEvent(id)}
          />
        ))}
      </section>
      <section class="card" aria-labelledby="redeliver-title">
        <h2 id="redeliver-title">Deliver an event again</h2>
        <ProblemBanner problem={redeliver.problem} />
        <form
          onSubmit={(event) => {
            event.preventDefault()
            void redeliverEvent(eventId.trim())
          }}
        >
          <Field
            id="redeliver-event"
            label="Event id"
            hint="From the events or an endpoint's deliveries"
            value={eventId}
            onValue={setEventId}
            required
          />
          <div class="actions">
            <button type="submit" disabled={redeliver.pending}>Redeliver</button>
          </div>
          <p role="status">{redelivered ?? ""}</p>
        </form>
      </section>
    </>
  )
}
