import type { ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { wholeNumber } from "../format.js"
import type { Versioned } from "../versioned.js"
import { ConflictPanel } from "./ConflictPanel.js"
import { ProblemBanner } from "./ProblemBanner.js"

/** A row of a versioned list: its `key` keeps its inputs its own while rows are added and removed. */
export interface ListRow {
  readonly key: string
}

/**
 * An administrator's edit of a versioned list (the limits, the alerts): a compact list, a line a
 * row, each with an editor opened on demand (a new row opens in it); saved whole under the
 * version read (console/versioned.ts). A 422 names the row ("Limit 2: …") above the list, opens
 * that row's editor and moves the focus to the first field it names; a pointer to a whole row
 * or to the list is shown above it. A 409 is the conflict panel's.
 */
export const VersionedListForm = <R extends { readonly version: number }, D extends ListRow>(
  { versioned, noun, pointer, summary, editor, newRow, currentList, mineList }: {
    readonly versioned: Versioned<R, ReadonlyArray<D>>
    /** "limit", "alert": the rows' name, for legends, buttons and errors. */
    readonly noun: string
    /** The list's member in the body: `limits` makes `#/limits/1/amount_usd` row 2's amount. */
    readonly pointer: string
    /** A row in a line: what it is and what it bounds. */
    readonly summary: (row: D) => ComponentChildren
    /** The row's fields; `at` is its pointer prefix (`limits/1`), for each field's error. */
    readonly editor: (row: D, at: string, change: (patch: Partial<Omit<D, "key">>) => void) => ComponentChildren
    readonly newRow: () => D
    readonly currentList: (record: R) => ComponentChildren
    readonly mineList: (draft: ReadonlyArray<D>) => ComponentChildren
  }
) => {
  const { draft, errors } = versioned
  const [opened, setOpened] = useState<ReadonlySet<string>>(new Set())
  const form = useRef<HTMLFormElement>(null)
  const title = `${noun.charAt(0).toUpperCase()}${noun.slice(1)}`
  const rowOfPointer = (path: string) => {
    const match = new RegExp(`^${pointer}/(\\d+)`).exec(path)
    return match === null ? undefined : draft?.[wholeNumber(match[1] ?? "", 3)]
  }
  const invalid = Object.keys(errors).flatMap((path) => {
    const row = rowOfPointer(path)
    return row === undefined ? [] : [row.key]
  })

  // A 422: the rows it names open, and the focus goes to the first field it names.
  useEffect(() => {
    if (invalid.length === 0) return
    setOpened((before) => new Set([...before, ...invalid]))
    requestAnimationFrame(() => form.current?.querySelector<HTMLElement>("[aria-invalid=true]")?.focus())
  }, [versioned.problem])

  if (draft === undefined) return null
  const change = (key: string) => (patch: Partial<Omit<D, "key">>) =>
    versioned.setDraft(draft.map((row) => row.key === key ? { ...row, ...patch } : row))
  const toggle = (key: string, open: boolean) =>
    setOpened((before) => {
      const next = new Set(before)
      if (open) next.add(key)
      else next.delete(key)
      return next
    })
  const named = Object.entries(errors).flatMap(([path, detail]) => {
    const row = rowOfPointer(path)
    return row === undefined ? [] : [`${title} ${draft.indexOf(row) + 1}: ${detail}`]
  })

  return (
    <>
      <ProblemBanner problem={versioned.problem} onRetry={() => void versioned.save()} />
      {named.length > 0 && (
        <ul class="field-error" aria-label={`What to fix, by ${noun}`}>
          {named.map((line) => <li key={line}>{line}</li>)}
        </ul>
      )}
      {errors[pointer] !== undefined && <p class="field-error">{errors[pointer]}</p>}
      {versioned.conflict !== undefined && (
        <ConflictPanel
          detail={versioned.conflict.detail}
          current={currentList(versioned.conflict.current)}
          mine={mineList(draft)}
          onApplyMine={() => void versioned.applyMine()}
          onKeepCurrent={versioned.keepCurrent}
        />
      )}
      <form
        ref={form}
        class="rows"
        onSubmit={(event) => {
          event.preventDefault()
          void versioned.save()
        }}
      >
        <ol class="list-rows">
          {draft.map((row, index) => {
            const at = `${pointer}/${index}`
            const open = opened.has(row.key)
            return (
              <li key={row.key}>
                {open
                  ? (
                    <fieldset class="row">
                      <legend>{title} {index + 1}</legend>
                      {errors[at] !== undefined && <p class="field-error">{errors[at]}</p>}
                      {editor(row, at, change(row.key))}
                      <div class="actions">
                        <button type="button" class="secondary" onClick={() => toggle(row.key, false)}>
                          Done with {noun} {index + 1}
                        </button>
                        <button
                          type="button"
                          class="secondary"
                          onClick={() => versioned.setDraft(draft.filter((other) => other.key !== row.key))}
                        >
                          Remove {noun} {index + 1}
                        </button>
                      </div>
                    </fieldset>
                  )
                  : (
                    <div class="row-line">
                      <span>
                        <span class="row-number">{index + 1}.</span> {summary(row)}
                      </span>
                      <button type="button" class="secondary" onClick={() => toggle(row.key, true)}>
                        Edit {noun} {index + 1}
                      </button>
                    </div>
                  )}
              </li>
            )
          })}
        </ol>
        <div class="actions">
          <button
            type="button"
            class="secondary"
            onClick={() => {
              const row = newRow()
              versioned.setDraft([...draft, row])
              toggle(row.key, true)
            }}
          >
            Add {noun === "alert" ? "an" : "a"} {noun}
          </button>
          <button type="submit" disabled={versioned.saving || versioned.conflict !== undefined}>
            Save the {noun}s
          </button>
        </div>
        <p role="status">
          {versioned.saved === undefined ? "" : `${title}s saved (version ${versioned.saved.version}).`}
        </p>
      </form>
    </>
  )
}
