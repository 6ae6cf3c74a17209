import type { ComponentChildren } from "preact"
import { type PageEntry, PAGES } from "../pages.js"
import { useSignedIn } from "../session.js"

/**
 * The frame around every page: a skip link to the page's content, the account and who is
 * signed in, the navigation (members' pages, then "Settings" for administrators), sign-out.
 */
export const Shell = ({ current, children }: { readonly current: string; readonly children: ComponentChildren }) => {
  const signedIn = useSignedIn()
  // A member's list holds the admin pages they may read; an administrator has them under Settings.
  const visible = PAGES.filter((page) => !page.admin || signedIn.isAdmin || page.readable === true)
  const listedAsSetting = (page: PageEntry) => page.admin && signedIn.isAdmin
  const link = (page: PageEntry) => (
    <li key={page.path}>
      <a href={`#/${page.path}`} aria-current={page.path === current ? "page" : undefined}>{page.title}</a>
    </li>
  )
  const settings = visible.filter(listedAsSetting)
  return (
    <div class="shell">
      <a
        class="skip-link"
        href="#main"
        onClick={(event) => {
          // The router owns the address's hash: move the focus without changing it.
          event.preventDefault()
          document.getElementById("main")?.focus()
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <p class="brand">Account console</p>
        <p class="who">
          <span class="who-name">{signedIn.me.user.name}</span>{" "}
          <span class="who-role">{signedIn.isAdmin ? "administrator" : "member"}</span>{" "}
          <span class="who-account" title={signedIn.me.account.id}>
            {signedIn.me.account.kind === "client" ? "organisation account" : "personal account"}
          </span>
        </p>
        <button type="button" class="secondary" onClick={() => void signedIn.signOut()}>Sign out</button>
      </header>
      <nav class="nav" aria-label="Console">
        <ul>{visible.filter((page) => !listedAsSetting(page)).map(link)}</ul>
        {settings.length > 0 && (
          <>
            <h2 class="nav-heading" id="nav-settings">Settings</h2>
            <ul aria-labelledby="nav-settings">{settings.map(link)}</ul>
          </>
        )}
      </nav>
      <main id="main" tabIndex={-1}>{children}</main>
    </div>
  )
}
