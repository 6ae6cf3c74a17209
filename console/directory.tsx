/**
 * Names for the ids the API carries (D23): the account's repositories and members, read once a
 * sign-in through the directory's reads (`listRepositories`, `listMembers`, every page), and
 * shown wherever an id would be. Names change and ids do not, so the API keeps ids everywhere
 * and the console resolves them here. A null id is "Unattributed"; an id the directory does not
 * know (made since it was read) shows shortened. The whole id is on demand: a copy button.
 */
import type { AccountApiClient } from "@account-api/client/web"
import { type ComponentChildren, createContext } from "preact"
import { useContext, useState } from "preact/hooks"
import { middleId, shortId, UNATTRIBUTED_LABEL } from "./format.js"
import { type Loaded, useLoad } from "./session.js"

type RepositoryPage = Awaited<ReturnType<AccountApiClient["listRepositories"]>>
type MemberPage = Awaited<ReturnType<AccountApiClient["listMembers"]>>
export type DirectoryRepository = RepositoryPage["repositories"][number]
export type DirectoryMember = MemberPage["members"][number]

export interface Directory {
  readonly repositories: ReadonlyArray<DirectoryRepository>
  readonly members: ReadonlyArray<DirectoryMember>
}

/** A directory page's size: the most the API gives at once. */
const PAGE = 500

async function readAll<A>(
  read: (after: string | undefined) => Promise<{ readonly next_after: string | null } & A>
): Promise<ReadonlyArray<A>> {
  const pages: Array<A> = []
  for (let after: string | undefined;;) {
    const page = await read(after)
    pages.push(page)
    if (page.next_after === null) return pages
    after = page.next_after
  }
}

const loadDirectory = async (api: AccountApiClient): Promise<Directory> => {
  const [repositories, members] = await Promise.all([
    readAll((after) => api.listRepositories({ limit: PAGE, ...(after === undefined ? {} : { after }) })),
    readAll((after) => api.listMembers({ limit: PAGE, ...(after === undefined ? {} : { after }) }))
  ])
  return {
    repositories: repositories.flatMap((page) => page.repositories),
    members: members.flatMap((page) => page.members)
  }
}

const DirectoryContext = createContext<Loaded<Directory> | undefined>(undefined)

/** Reads the directory once for the pages inside it. */
export const DirectoryProvider = ({ children }: { readonly children: ComponentChildren }) => {
  const directory = useLoad(loadDirectory, [])
  return <DirectoryContext.Provider value={directory}>{children}</DirectoryContext.Provider>
}

const EMPTY: Directory = { repositories: [], members: [] }

/** The directory as read (empty until it is), and `reload` after a change. */
export const useDirectory = (): Directory & { readonly reload: () => void } => {
  const loaded = useContext(DirectoryContext)
  return { ...(loaded?.data ?? EMPTY), reload: loaded?.reload ?? (() => {}) }
}

export const repositoryName = (directory: Directory, id: string | null): string =>
  id === null
    ? UNATTRIBUTED_LABEL
    : directory.repositories.find((repository) => repository.id === id)?.name ?? shortId(id)

export const userName = (directory: Directory, id: string | null): string =>
  id === null ? UNATTRIBUTED_LABEL : directory.members.find((member) => member.id === id)?.name ?? shortId(id)

/** Copies `id` to the clipboard, saying so; its label names what the id is of. */
export const CopyId = ({ id, of }: { readonly id: string; readonly of: string }) => {
  const [copied, setCopied] = useState(false)
  return (
    <button
      type="button"
      class="copy-id"
      title={id}
      aria-label={copied ? `Copied the id of ${of}` : `Copy the id of ${of}`}
      onClick={() => void navigator.clipboard.writeText(id).then(() => setCopied(true), () => setCopied(false))}
    >
      {copied ? "Copied" : "id"}
    </button>
  )
}

/** A repository or user by name, with its id on demand; "Unattributed" for none. */
export const Named = (
  { kind, id }: { readonly kind: "repository" | "user"; readonly id: string | null }
) => {
  const directory = useDirectory()
  const name = kind === "repository" ? repositoryName(directory, id) : userName(directory, id)
  if (id === null) return <span class="muted">{name}</span>
  return (
    <span class="named">
      <span class="name" title={id}>{name}</span> <CopyId id={id} of={name} />
    </span>
  )
}

/** A runner's session id, cut in the middle, whole on hover and by copy. */
export const SessionId = ({ id }: { readonly id: string }) => (
  <span class="named">
    <span class="id" title={id}>{middleId(id)}</span> <CopyId id={id} of={`session ${id}`} />
  </span>
)
