import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { DASHBOARD_PATH } from "./Board.js"

/**
 * The dashboard's own pages: sign-in, sign-out and "not an operator".
 * Plain forms without scripts; nothing a request carried is echoed but the
 * email typed into the form, escaped. Passwords, tokens and cookies never
 * appear in a page.
 */

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`)

const style = `body{font-family:system-ui,sans-serif;background:#f4f5f7;color:#1f2933;margin:0}
main{max-width:22rem;margin:12vh auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{font-size:1.25rem;margin:0 0 1rem}label{display:block;margin:.75rem 0 .25rem}
input{width:100%;box-sizing:border-box;padding:.5rem;font:inherit}
button{margin-top:1.25rem;padding:.5rem 1rem;font:inherit;cursor:pointer}
.message{background:#fdecea;color:#8a1c13;padding:.5rem .75rem;border-radius:4px}`

const layout = (title: string, body: string) =>
  `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Account API queues</title>
<style>${style}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>`

/**
 * No caching, no framing, no scripts, and forms post only back here: these
 * pages take passwords.
 */
const page = (html: string, status: number, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.html(html).pipe(
    HttpServerResponse.setStatus(status),
    HttpServerResponse.setHeaders({
      "cache-control": "no-store",
      "content-security-policy":
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
      "referrer-policy": "no-referrer",
      ...headers
    })
  )

const message = (text: string | undefined) =>
  text === undefined ? "" : `<p class="message" role="alert">${escapeHtml(text)}</p>`

export const signInPage = (options: {
  readonly status: number
  readonly message?: string
  readonly email?: string
  readonly headers?: Readonly<Record<string, string>>
}) =>
  page(
    layout(
      "Sign in",
      `<h1>Queue dashboard</h1>
<p>Sign in with an operator account.</p>
${message(options.message)}
<form method="post" action="${DASHBOARD_PATH}/login">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(options.email ?? "")}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`
    ),
    options.status,
    options.headers
  )

const signOutForm = `<form method="post" action="${DASHBOARD_PATH}/logout">
<button type="submit">Sign out</button>
</form>`

export const forbiddenPage = () =>
  page(
    layout(
      "Not an operator",
      `<h1>Queue dashboard</h1>
${message("This user is not an operator; the dashboard is for operators only.")}
${signOutForm}`
    ),
    403
  )

export const signOutPage = () =>
  page(
    layout(
      "Sign out",
      `<h1>Queue dashboard</h1>
<p>Sign out of the queue dashboard? This ends the sign-in.</p>
${signOutForm}`
    ),
    200
  )
