/**
 * An administrator's edit of a versioned record (the wallet's budget, the limits, the alerts, the
 * account policy, a repository's override): the form holds a draft made from the version read,
 * and a save sends that version as `expected_version` (D5).
 *
 * A 409 `version_conflict` means someone else saved first. It is never retried blindly (seed §7):
 * the record is read again and `conflict` holds it beside the person's draft, for them to decide
 * again: `applyMine` saves their draft on top of the version now current, `keepCurrent` drops
 * their draft for it (components/ConflictPanel.tsx shows both). Other problems stay in `problem`
 * (a 422's errors by field in `errors`).
 */
import type { AccountApiClient, AccountApiError } from "@account-api/client/web"
import { useEffect, useState } from "preact/hooks"
import { asProblem, type Loaded, useAction, useLoad, useSignedIn } from "./session.js"

export interface Conflict<R> {
  readonly detail: string
  /** The record as read again after the 409. */
  readonly current: R
}

export interface Versioned<R, D> {
  readonly loaded: Loaded<R>
  /** The version the draft was made from (what a save sends as `expected_version`); undefined until read. */
  readonly base: R | undefined
  readonly draft: D | undefined
  readonly setDraft: (draft: D) => void
  readonly save: () => Promise<void>
  readonly saving: boolean
  /** The last save's problem, but for a version conflict (see `conflict`). */
  readonly problem: AccountApiError | undefined
  /** A 422's errors by field, as `fieldErrors` gives them. */
  readonly errors: Readonly<Record<string, string>>
  readonly conflict: Conflict<R> | undefined
  readonly applyMine: () => Promise<void>
  readonly keepCurrent: () => void
  /** The record the last save answered, until the draft changes again. */
  readonly saved: R | undefined
}

const VERSION_CONFLICT = "version_conflict"

export const useVersioned = <R extends { readonly version: number }, D>(options: {
  readonly load: (api: AccountApiClient) => Promise<R>
  readonly toDraft: (record: R) => D
  /** The write; `idempotencyKey` is the action's (wallet mutations send it, D6). */
  readonly save: (api: AccountApiClient, draft: D, expectedVersion: number, idempotencyKey: string) => Promise<R>
}): Versioned<R, D> => {
  const signedIn = useSignedIn()
  const loaded = useLoad(options.load, [])
  const [base, setBase] = useState<R | undefined>(undefined)
  const [draft, setDraftState] = useState<D | undefined>(undefined)
  const [conflict, setConflict] = useState<Conflict<R> | undefined>(undefined)
  const [saved, setSaved] = useState<R | undefined>(undefined)
  const action = useAction<{ readonly draft: D; readonly version: number }, R>((api, input, key) =>
    options.save(api, input.draft, input.version, key)
  )

  // The first read makes the draft; later reads (a retry) never overwrite what the person typed.
  useEffect(() => {
    if (loaded.data !== undefined && base === undefined) {
      setBase(loaded.data)
      setDraftState(options.toDraft(loaded.data))
    }
  }, [loaded.data])

  const adopt = (record: R) => {
    setBase(record)
    setDraftState(options.toDraft(record))
    setConflict(undefined)
  }

  const saveOn = async (version: number, mine: D) => {
    setSaved(undefined)
    const result = await action.run({ draft: mine, version })
    if (result !== undefined) {
      adopt(result)
      setSaved(result)
    }
  }

  // A version conflict is read from the action's problem once the run has ended.
  useEffect(() => {
    const problem = action.problem
    if (problem?.code !== VERSION_CONFLICT || base === undefined) return
    const lastRead = base
    signedIn.call(options.load).then(
      (current) => setConflict({ detail: problem.detail, current }),
      // Unreadable just now: the conflict is still told, against the version last read.
      (error: unknown) =>
        setConflict({
          detail: `${problem.detail} Reading it again failed: ${asProblem(error).detail}`,
          current: lastRead
        })
    )
  }, [action.problem])

  const problem = action.problem?.code === VERSION_CONFLICT ? undefined : action.problem

  return {
    loaded,
    base,
    draft,
    setDraft: (next: D) => {
      setDraftState(next)
      setSaved(undefined)
    },
    save: async () => {
      if (base !== undefined && draft !== undefined) await saveOn(base.version, draft)
    },
    saving: action.pending,
    problem,
    errors: problem === undefined ? {} : action.errors,
    conflict,
    applyMine: async () => {
      if (conflict === undefined || draft === undefined) return
      const mine = draft
      setBase(conflict.current)
      setConflict(undefined)
      await saveOn(conflict.current.version, mine)
    },
    keepCurrent: () => {
      if (conflict !== undefined) adopt(conflict.current)
      action.clear()
    },
    saved
  }
}
