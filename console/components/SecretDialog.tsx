import { useEffect, useRef, useState } from "preact/hooks"

/**
 * A webhook endpoint's secret, shown once (D17): the service answers it only when the endpoint is
 * made or its secret rotated. A modal dialog holds it with a copy button; closing the dialog
 * drops it (the page keeps no copy), so no page shows it again.
 */
export const SecretDialog = (
  { title, secret, onClose }: { readonly title: string; readonly secret: string; readonly onClose: () => void }
) => {
  const dialog = useRef<HTMLDialogElement>(null)
  const [copied, setCopied] = useState<string | undefined>(undefined)
  useEffect(() => {
    dialog.current?.showModal()
  }, [])
  const copy = () =>
    navigator.clipboard.writeText(secret).then(
      () => setCopied("Copied to the clipboard."),
      () => setCopied("The browser refused the clipboard: select the secret and copy it.")
    )
  return (
    <dialog ref={dialog} class="secret-dialog" aria-labelledby="secret-title" onClose={onClose}>
      <h2 id="secret-title">{title}</h2>
      <p>
        This is the only time the secret is shown. Keep it where your receiver reads it: it verifies each delivery's
        signature.
      </p>
      <label for="webhook-secret">Signing secret</label>
      <input id="webhook-secret" class="secret" type="text" readOnly value={secret} />
      <div class="actions">
        <button type="button" onClick={() => void copy()}>Copy the secret</button>
        <button type="button" class="secondary" onClick={() => dialog.current?.close()}>I have kept it, close</button>
      </div>
      <p role="status">{copied ?? ""}</p>
    </dialog>
  )
}
