/**
 * The console's API session (D20), the one way pages reach the API. (Its class is `SignedIn`:
 * elsewhere in the console, as in the API, a "session" is a runner's settlement session.)
 *
 * - `SignedIn` holds the client package's `AccountApiClient` (`@account-api/client/web`),
 *   the bearer token in this tab's `sessionStorage` only, and who is signed in (`/auth/me`).
 *   A 401 from any call drops the token and returns to sign-in with the reason.
 * - `useLoad(load, deps)` reads: a 503, a 429 or no answer at all shows "try again" and tries
 *   again by itself with a growing wait (the service's Retry-After when it gives one).
 * - `useAction(perform)` writes: the idempotency key is made once per action and reused when the
 *   person retries it after no answer came (a network error, a 503), so the write happens once;
 *   a new action (other values, or after any answer) gets a new key. Its `problem` gives a 422's
 *   errors by field (`fieldErrors`) and tells a 409 (`isConflict`), for which a page refetches,
 *   shows the current state (components/ConflictPanel.tsx) and lets the person decide again.
 *
 * - `useEventStream(onEvent, after, ready, onWalletChanged)` follows the account's live event
 *   stream while the page is open; with `onWalletChanged`, the stream's change notices too (D17).
 * - `useLiveChanges()` counts the account's changes (events and wallet notices) from one stream:
 *   a `deps` entry of `useLoad` to read again when something moved, without polling.
 *
 * Pages call `useSignedIn()` for who is signed in (`isAdmin`, `me`, `api`) and these hooks for the rest.
 */
import { AccountApiClient, AccountApiError, type AccountEvent, newIdempotencyKey } from "@account-api/client/web"
import { createContext } from "preact"
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks"

const TOKEN_KEY = "account-api-console.token"

/** The signed-in person as `/auth/me` answers. */
export type Me = Awaited<ReturnType<AccountApiClient["me"]>>

/** Waits before reading again after a 503, a 429 or no answer, doubled each time up to the last. */
const FIRST_WAIT_SECONDS = 1
const LONGEST_WAIT_SECONDS = 30

/** The API answers at the page's own origin, under the same path prefix as `/console`. */
const apiBaseUrl = (): string => new URL(".", window.location.href).href

/** The token of this tab, if it signed in: `sessionStorage`, never `localStorage` or a cookie (D20). */
export const storedToken = (): string | undefined => window.sessionStorage.getItem(TOKEN_KEY) ?? undefined

export class SignedIn {
  readonly api: AccountApiClient
  readonly me: Me
  readonly #signedOut: (reason: string) => void

  constructor(api: AccountApiClient, me: Me, signedOut: (reason: string) => void) {
    this.api = api
    this.me = me
    this.#signedOut = signedOut
  }

  get isAdmin(): boolean {
    return this.me.user.is_admin
  }

  /**
   * A client whose calls are each tried once: the console itself shows "try again" and waits
   * (`useLoad`) or lets the person retry with the same key (`useAction`).
   */
  static client(token?: string): AccountApiClient {
    return new AccountApiClient({
      baseUrl: apiBaseUrl(),
      retry: { attempts: 1 },
      ...(token === undefined ? {} : { token })
    })
  }

  /** Signs in with `POST /auth/login`, keeps the token in this tab and reads who it is. */
  static async signIn(email: string, password: string, signedOut: (reason: string) => void): Promise<SignedIn> {
    const api = SignedIn.client()
    const login = await api.login(email, password)
    window.sessionStorage.setItem(TOKEN_KEY, login.access_token)
    return new SignedIn(api, await api.me(), signedOut)
  }

  /** The tab's earlier sign-in, if its token still holds; a 401 drops it. */
  static async resume(token: string, signedOut: (reason: string) => void): Promise<SignedIn> {
    const api = SignedIn.client(token)
    try {
      return new SignedIn(api, await api.me(), signedOut)
    } catch (error) {
      if (isUnauthenticated(error)) forgetToken()
      throw error
    }
  }

  /** Ends the sign-in on the service too; the token goes from this tab whatever the answer. */
  async signOut(): Promise<void> {
    try {
      await this.api.logout()
    } catch {
      // Already ended or unreachable: the tab forgets it all the same.
    } finally {
      forgetToken()
      this.#signedOut("You signed out.")
    }
  }

  /** Runs a call; a 401 ends the sign-in here and returns to sign-in with the service's reason. */
  async call<A>(perform: (api: AccountApiClient) => Promise<A>): Promise<A> {
    try {
      return await perform(this.api)
    } catch (error) {
      if (isUnauthenticated(error)) {
        forgetToken()
        this.#signedOut(`Your sign-in ended: ${error.detail}`)
      }
      throw error
    }
  }
}

const forgetToken = () => window.sessionStorage.removeItem(TOKEN_KEY)

const isUnauthenticated = (error: unknown): error is AccountApiError =>
  error instanceof AccountApiError && error.status === 401

export const SignedInContext = createContext<SignedIn | undefined>(undefined)

/** Who is signed in, with the API; pages render only inside a sign-in. */
export const useSignedIn = (): SignedIn => {
  const signedIn = useContext(SignedInContext)
  if (signedIn === undefined) throw new Error("useSignedIn outside a signed-in console")
  return signedIn
}

/** A failed call as a page shows it: the service's problem, or no answer (status 0). */
export const asProblem = (error: unknown): AccountApiError =>
  error instanceof AccountApiError
    ? error
    : new AccountApiError(0, { detail: error instanceof Error ? error.message : String(error) })

/** No answer, or an answer that says to come back later: asking again may succeed. */
export const isTransient = (problem: AccountApiError): boolean =>
  problem.status === 0 || problem.status === 503 || problem.status === 429 || problem.status >= 500

/** Someone else changed what this form edits since it was read (seed §7): refetch and let the person decide. */
export const isConflict = (problem: AccountApiError): boolean => problem.status === 409

/**
 * A 422's errors by field: `#/budget_usd` as `budget_usd`, `#/limits/0/amount_usd` as
 * `limits/0/amount_usd`, for each field to show its own beside it.
 */
export const fieldErrors = (problem: AccountApiError | undefined): Readonly<Record<string, string>> =>
  Object.fromEntries((problem?.errors ?? []).map((error) => [error.pointer.replace(/^#\/?/, ""), error.detail]))

/** The wait before the next automatic try: the service's Retry-After, else doubling from a second. */
const waitSeconds = (problem: AccountApiError, tries: number): number =>
  problem.retry_after_seconds ?? Math.min(LONGEST_WAIT_SECONDS, FIRST_WAIT_SECONDS * 2 ** tries)

export interface Loaded<A> {
  readonly data: A | undefined
  readonly problem: AccountApiError | undefined
  readonly loading: boolean
  /** Seconds until the next automatic try after a transient problem. */
  readonly retryInSeconds: number | undefined
  /** Reads again now (the "Try again" button, or after a change). */
  readonly reload: () => void
}

/**
 * Reads with `load` when mounted and whenever `deps` change. Transient problems are tried again
 * with backoff (shown by components/ProblemBanner.tsx with a "Try again" button); others stay
 * shown. The last data stays while a reload runs, so a page never blanks.
 */
export const useLoad = <A>(load: (api: AccountApiClient) => Promise<A>, deps: ReadonlyArray<unknown>): Loaded<A> => {
  const signedIn = useSignedIn()
  const [state, setState] = useState<Omit<Loaded<A>, "reload">>({
    data: undefined,
    problem: undefined,
    loading: true,
    retryInSeconds: undefined
  })
  const [round, setRound] = useState(0)
  const tries = useRef(0)
  const reload = useCallback(() => setRound((n) => n + 1), [])

  useEffect(() => {
    let current = true
    let timer: ReturnType<typeof setTimeout> | undefined
    setState((before) => ({ ...before, loading: true }))
    signedIn.call(load).then(
      (data) => {
        if (!current) return
        tries.current = 0
        setState({ data, problem: undefined, loading: false, retryInSeconds: undefined })
      },
      (error: unknown) => {
        if (!current) return
        const problem = asProblem(error)
        const retryInSeconds = isTransient(problem) ? waitSeconds(problem, tries.current++) : undefined
        setState((before) => ({ ...before, problem, loading: false, retryInSeconds }))
        if (retryInSeconds !== undefined) timer = setTimeout(reload, retryInSeconds * 1000)
      }
    )
    return () => {
      current = false
      if (timer !== undefined) clearTimeout(timer)
    }
    // `load` is a new function each render; `deps` say when it reads something else.
  }, [...deps, round])

  return { ...state, reload }
}

export interface Action<I, A> {
  /** Performs the action; resolves to its result, or undefined when it failed (see `problem`). */
  readonly run: (input: I) => Promise<A | undefined>
  readonly pending: boolean
  readonly problem: AccountApiError | undefined
  /** The 422's errors by field (`fieldErrors`); empty otherwise. */
  readonly errors: Readonly<Record<string, string>>
  readonly clear: () => void
}

/**
 * A write. `perform` gets the action's idempotency key: made when an action starts and kept
 * while the person retries the same input after no answer came, since that attempt may have
 * been applied (the same key makes the service apply it once, D6). Any answer ends the action:
 * the next run, even with the same input, is a new action with a new key.
 */
export const useAction = <I, A>(
  perform: (api: AccountApiClient, input: I, idempotencyKey: string) => Promise<A>
): Action<I, A> => {
  const signedIn = useSignedIn()
  const [pending, setPending] = useState(false)
  const [problem, setProblem] = useState<AccountApiError | undefined>(undefined)
  const unanswered = useRef<{ readonly input: string; readonly key: string } | undefined>(undefined)

  const run = async (input: I): Promise<A | undefined> => {
    const inputText = JSON.stringify(input)
    const key = unanswered.current?.input === inputText ? unanswered.current.key : newIdempotencyKey()
    unanswered.current = undefined
    setPending(true)
    setProblem(undefined)
    try {
      return await signedIn.call((api) => perform(api, input, key))
    } catch (error) {
      const failure = asProblem(error)
      if (isTransient(failure)) unanswered.current = { input: inputText, key }
      setProblem(failure)
      return undefined
    } finally {
      setPending(false)
    }
  }

  return { run, pending, problem, errors: fieldErrors(problem), clear: () => setProblem(undefined) }
}

/**
 * Every event of the account's live stream (the client's `streamEvents`, which reconnects with
 * Last-Event-ID) from `after` on (from now without it), while the page is open. A 401 ends the
 * sign-in as any call's does.
 */
export const useEventStream = (
  onEvent: (event: AccountEvent) => void,
  after: string | undefined,
  ready = true,
  onWalletChanged?: () => void
): void => {
  const signedIn = useSignedIn()
  const handler = useRef(onEvent)
  handler.current = onEvent
  const changed = useRef(onWalletChanged)
  changed.current = onWalletChanged
  const withNotices = onWalletChanged !== undefined
  useEffect(() => {
    if (!ready) return
    const stop = new AbortController()
    signedIn.call(async (api) => {
      for await (
        const event of api.streamEvents({
          signal: stop.signal,
          ...(after === undefined ? {} : { lastEventId: after }),
          ...(withNotices ? { onWalletChanged: () => changed.current?.() } : {})
        })
      ) {
        handler.current(event)
      }
    }).catch(() => {
      // Refused for good (a 401 has already signed out): the page's reads still show the state.
    })
    return () => stop.abort()
  }, [ready, after])
}

/**
 * Counts the account's changes while the page is open: every event of the live stream and every
 * change notice (a reserve, a spend, a release writes no event, D17), for `useLoad` to read
 * again. No polling: an idle page makes no request.
 */
export const useLiveChanges = (): number => {
  const [changes, setChanges] = useState(0)
  const bump = () => setChanges((n) => n + 1)
  useEventStream(bump, undefined, true, bump)
  return changes
}
