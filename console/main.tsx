/**
 * The console's entry (D20): mounts the app, keeps the sign-in, and routes by the address's hash
 * (`/console#/spend`), so the service serves one page and a reload stays on the same one. Pages
 * come from pages.ts; the API session from session.ts.
 */
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { Shell } from "./components/Shell.js"
import { DirectoryProvider } from "./directory.js"
import { HOME, PAGES } from "./pages.js"
import { SignIn } from "./pages/SignIn.js"
import { asProblem, SignedIn, SignedInContext, storedToken } from "./session.js"
import { SettingsProvider } from "./zone.js"
import "./styles.css"

type State =
  | { readonly phase: "resuming" }
  | { readonly phase: "signed-out"; readonly reason: string | undefined }
  | { readonly phase: "signed-in"; readonly signedIn: SignedIn }

const pageOfHash = (): string => /^#\/([\w-]+)/.exec(window.location.hash)?.[1] ?? HOME

const useRoute = (): string => {
  const [page, setPage] = useState(pageOfHash)
  useEffect(() => {
    // Other hashes (the skip link's `#main`) are not pages: they leave the route as it is.
    const follow = () => {
      if (window.location.hash.startsWith("#/") || window.location.hash === "") setPage(pageOfHash())
    }
    window.addEventListener("hashchange", follow)
    return () => window.removeEventListener("hashchange", follow)
  }, [])
  return page
}

const App = () => {
  const token = storedToken()
  const [state, setState] = useState<State>(
    token === undefined ? { phase: "signed-out", reason: undefined } : { phase: "resuming" }
  )
  const route = useRoute()
  const signedOut = (reason: string) => setState({ phase: "signed-out", reason })

  useEffect(() => {
    if (token === undefined) return
    SignedIn.resume(token, signedOut).then(
      (signedIn) => setState({ phase: "signed-in", signedIn }),
      (error: unknown) => signedOut(`Your sign-in ended: ${asProblem(error).detail}`)
    )
  }, [])

  useEffect(() => {
    const page = PAGES.find((entry) => entry.path === route)
    document.title = `${page?.title ?? "Not found"} · Account console`
  }, [route])

  switch (state.phase) {
    case "resuming":
      return <p class="resuming" role="status">Opening the console…</p>
    case "signed-out":
      return (
        <SignIn
          reason={state.reason}
          onSignedIn={(signedIn) => setState({ phase: "signed-in", signedIn })}
          onSignedOut={signedOut}
        />
      )
    case "signed-in":
      return (
        <SignedInContext.Provider value={state.signedIn}>
          <DirectoryProvider>
            <SettingsProvider>
              <Shell current={route}>
                <Page route={route} isAdmin={state.signedIn.isAdmin} />
              </Shell>
            </SettingsProvider>
          </DirectoryProvider>
        </SignedInContext.Provider>
      )
  }
}

const Page = ({ route, isAdmin }: { readonly route: string; readonly isAdmin: boolean }) => {
  const page = PAGES.find((entry) => entry.path === route)
  if (page === undefined) {
    return (
      <>
        <h1>No such page</h1>
        <p>
          <a href={`#/${HOME}`}>Go to the overview</a>
        </p>
      </>
    )
  }
  if (page.admin && page.readable !== true && !isAdmin) {
    return (
      <>
        <h1>{page.title}</h1>
        <p>This page is for the account's administrators. Ask one of them to make this change.</p>
      </>
    )
  }
  const Component = page.component
  return <Component key={page.path} />
}

const root = document.getElementById("console")
if (root !== null) render(<App />, root)
