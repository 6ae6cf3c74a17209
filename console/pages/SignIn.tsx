import type { AccountApiError } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { Field } from "../components/Field.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { asProblem, fieldErrors, SignedIn } from "../session.js"

/**
 * Sign-in with `POST /auth/login` (D2), as every client does. `reason` says why the person is
 * here again: signed out, or the service ended the sign-in (a 401's detail).
 */
export const SignIn = (
  { reason, onSignedIn, onSignedOut }: {
    readonly reason: string | undefined
    readonly onSignedIn: (signedIn: SignedIn) => void
    readonly onSignedOut: (reason: string) => void
  }
) => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [pending, setPending] = useState(false)
  const [problem, setProblem] = useState<AccountApiError | undefined>(undefined)
  const errors = fieldErrors(problem)

  const submit = async (event: Event) => {
    event.preventDefault()
    setPending(true)
    setProblem(undefined)
    try {
      onSignedIn(await SignedIn.signIn(email, password, onSignedOut))
    } catch (error) {
      setProblem(asProblem(error))
      setPending(false)
    }
  }

  return (
    <main id="main" class="sign-in">
      <h1>Sign in to the account console</h1>
      {reason !== undefined && problem === undefined && <p class="banner banner-info" role="status">{reason}</p>}
      <ProblemBanner problem={problem} />
      <form onSubmit={submit} noValidate>
        <Field
          id="email"
          label="Email"
          type="email"
          autocomplete="username"
          required
          value={email}
          error={errors["email"]}
          onValue={setEmail}
        />
        <Field
          id="password"
          label="Password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          error={errors["password"]}
          onValue={setPassword}
        />
        <button type="submit" disabled={pending}>{pending ? "Signing in…" : "Sign in"}</button>
      </form>
    </main>
  )
}
