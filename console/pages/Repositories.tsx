import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { ConflictPanel } from "../components/ConflictPanel.js"
import { DataTable } from "../components/DataTable.js"
import { SelectField } from "../components/Field.js"
import { type Capabilities, fieldLabel, PolicyControl, type PolicyValue, valueIn } from "../components/PolicyControl.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { Named, useDirectory } from "../directory.js"
import { useLoad, useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

type RepositoryPolicy = Awaited<ReturnType<AccountApiClient["getRepositoryPolicy"]>>
type Override = NonNullable<RepositoryPolicy["override"]>["policy"]

/** The read with the override's version at the top, as the edit's version (0: no override saved). */
const readRepository = async (api: AccountApiClient, id: string) => {
  const record = await api.getRepositoryPolicy(id)
  return { ...record, version: record.override?.version ?? 0 }
}

/** The override without `name`: the field inherits again. */
const without = (override: Override, name: string): Override =>
  Object.fromEntries(Object.entries(override).filter(([key]) => key !== name))

const OverrideText = (
  { override, capabilities }: { readonly override: Override; readonly capabilities: Capabilities }
) => {
  const set = Object.keys(capabilities.policy).filter((name) => valueIn(override, name) !== undefined)
  return (
    <ul>
      {set.length === 0 ? <li>No override: every field inherits</li> : set.map((name) => (
        <li key={name}>
          {fieldLabel(name)}: {String(valueIn(override, name))}
        </li>
      ))}
    </ul>
  )
}

const RepositoryEditor = (
  { id, capabilities, onSaved }: {
    readonly id: string
    readonly capabilities: Capabilities
    /** After a save: whether the repository has an override may have changed. */
    readonly onSaved: () => void
  }
) => {
  const signedIn = useSignedIn()
  const repository = useVersioned({
    load: (api) => readRepository(api, id),
    toDraft: (record): Override => record.override?.policy ?? {},
    save: async (api, draft, expected_version) => {
      const record = await api.replaceRepositoryPolicy(id, { policy: draft, expected_version })
      onSaved()
      return { ...record, version: record.override?.version ?? 0 }
    }
  })
  const { base, draft, errors } = repository
  const choose = (name: string, value: PolicyValue | undefined) => {
    if (draft === undefined) return
    repository.setDraft(value === undefined ? without(draft, name) : { ...draft, [name]: value })
  }
  return (
    <>
      <ProblemBanner
        problem={repository.loaded.problem}
        retryInSeconds={repository.loaded.retryInSeconds}
        onRetry={repository.loaded.reload}
      />
      {base !== undefined && (
        <section class="card" aria-labelledby="effective-title">
          <h2 id="effective-title">Effective policy of the repository</h2>
          <DataTable
            caption="Each value and where it comes from"
            rows={Object.keys(capabilities.policy)}
            rowKey={(name) => name}
            empty="No fields."
            columns={[
              { header: "Field", cell: (name) => fieldLabel(name) },
              { header: "Value", cell: (name) => String(valueIn(base.effective.policy, name)) },
              { header: "Comes from", cell: (name) => String(valueIn(base.effective.sources, name)) },
              {
                header: "Capped",
                cell: (name) =>
                  base.effective.capped.some((field) => field === name) ? "Lowered to the autonomy ceiling" : ""
              }
            ]}
          />
        </section>
      )}
      {signedIn.isAdmin && base !== undefined && draft !== undefined && (
        <section class="card" aria-labelledby="override-form-title">
          <h2 id="override-form-title">The repository's override (version {base.version})</h2>
          <ProblemBanner
            problem={repository.problem}
            onRetry={() =>
              void repository.save()}
          />
          {repository.conflict !== undefined && (
            <ConflictPanel
              detail={repository.conflict.detail}
              current={
                <OverrideText
                  override={repository.conflict.current.override?.policy ?? {}}
                  capabilities={capabilities}
                />
              }
              mine={<OverrideText override={draft} capabilities={capabilities} />}
              onApplyMine={() => void repository.applyMine()}
              onKeepCurrent={repository.keepCurrent}
            />
          )}
          <form
            class="policy-form"
            onSubmit={(event) => {
              event.preventDefault()
              void repository.save()
            }}
          >
            {Object.entries(capabilities.policy).map(([name, capability]) => (
              <PolicyControl
                key={name}
                name={name}
                capability={capability}
                value={valueIn(draft, name)}
                onChange={(value) => choose(name, value)}
                inherit={`Inherit (now ${String(valueIn(base.effective.policy, name))})`}
                locked={capability.repository_override ? undefined : "A repository may not override it"}
                error={errors[`policy/${name}`]}
              />
            ))}
            {errors["policy"] !== undefined && <p class="field-error">{errors["policy"]}</p>}
            <div class="actions">
              <button type="submit" disabled={repository.saving || repository.conflict !== undefined}>
                Save the override
              </button>
            </div>
            <p role="status">{repository.saved === undefined ? "" : "Override saved."}</p>
          </form>
        </section>
      )}
    </>
  )
}

/**
 * A repository's policy (D5): its sparse override, and the effective policy with each value's
 * source. The repository is picked by name from the account's directory (D23), with whether it
 * has an override; its id is there on demand.
 */
export const Repositories = () => {
  const capabilities = useLoad((api) => api.getCapabilities(), [])
  const directory = useDirectory()
  const [chosen, setChosen] = useState("")
  const [open, setOpen] = useState<string | undefined>(undefined)
  const repositories = directory.repositories
  const picked = repositories.find((repository) => repository.id === (chosen === "" ? repositories[0]?.id : chosen))
  return (
    <>
      <h1>Repositories</h1>
      <ProblemBanner
        problem={capabilities.problem}
        retryInSeconds={capabilities.retryInSeconds}
        onRetry={capabilities.reload}
      />
      {repositories.length === 0
        ? <p class="muted">The account has no repositories yet: an operator adds them (see the README).</p>
        : (
          <form
            class="controls"
            onSubmit={(event) => {
              event.preventDefault()
              if (picked !== undefined) setOpen(picked.id)
            }}
          >
            <SelectField
              id="repository"
              label="Repository"
              value={picked?.id ?? ""}
              options={repositories.map((repository) => ({
                value: repository.id,
                label: repository.has_policy_override ? `${repository.name} (has an override)` : repository.name
              }))}
              onChange={setChosen}
            />
            <button type="submit">Show its policy</button>
          </form>
        )}
      {open !== undefined && (
        <p>
          <Named kind="repository" id={open} />
        </p>
      )}
      {open !== undefined && capabilities.data !== undefined && (
        <RepositoryEditor
          key={open}
          id={open}
          capabilities={capabilities.data}
          onSaved={directory.reload}
        />
      )}
    </>
  )
}
