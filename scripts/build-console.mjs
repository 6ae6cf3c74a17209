// Builds the console (D20, docs/console.md) into `<folder>/console/`: its script and style as
// content-hashed files under `assets/`, the page that names them (`index.html`, from
// console/index.html), and `manifest.json`, every file a browser downloads with its size raw and
// gzipped, which docs/console.md states and test/ConsoleBundle.test.ts holds under the budget.
// Called by scripts/build.mjs, so `npm start`, `npm test` and the image build it alike.
import { build } from "esbuild"
import { createHash } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import path from "node:path"
import { gzipSync } from "node:zlib"
import { ROOT } from "./programs.mjs"

/** Where the page loads its files from, relative to `/console` (so the API may sit under a path of a proxy's). */
export const ASSETS_URL = "console/assets"

/** The page's placeholders, replaced with the hashed files' addresses. */
const SCRIPT_PLACEHOLDER = "%CONSOLE_SCRIPT%"
const STYLE_PLACEHOLDER = "%CONSOLE_STYLE%"
const ICON_PLACEHOLDER = "%CONSOLE_ICON%"

const gzipped = (bytes) => gzipSync(bytes, { level: 9 }).length

export async function buildConsole(outDir) {
  const consoleDir = path.resolve(outDir, "console")
  const assetsDir = path.join(consoleDir, "assets")
  mkdirSync(assetsDir, { recursive: true })
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ["console/main.tsx"],
    outdir: assetsDir,
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    minify: true,
    // Chart.js and Preact choose their production paths by it.
    define: { "process.env.NODE_ENV": "\"production\"" },
    tsconfig: "console/tsconfig.json",
    legalComments: "none",
    metafile: true,
    logLevel: "warning"
  })
  const outputs = Object.keys(result.metafile.outputs).map((output) => path.resolve(ROOT, output))
  const named = (extension) => {
    const file = outputs.find((output) => output.endsWith(extension))
    if (file === undefined) throw new Error(`the console's build made no ${extension} file`)
    return `${ASSETS_URL}/${path.basename(file)}`
  }
  // The favicon, content-hashed as the script and style are, served from the same folder under the same CSP.
  const icon = readFileSync(path.join(ROOT, "console", "favicon.svg"))
  const iconFile = path.join(
    assetsDir,
    `favicon-${createHash("sha256").update(icon).digest("hex").slice(0, 8).toUpperCase()}.svg`
  )
  writeFileSync(iconFile, icon)
  outputs.push(iconFile)
  const page = readFileSync(path.join(ROOT, "console", "index.html"), "utf8")
    .replace(SCRIPT_PLACEHOLDER, named(".js"))
    .replace(STYLE_PLACEHOLDER, named(".css"))
    .replace(ICON_PLACEHOLDER, `${ASSETS_URL}/${path.basename(iconFile)}`)
  writeFileSync(path.join(consoleDir, "index.html"), page)

  const files = [path.join(consoleDir, "index.html"), ...outputs].map((file) => {
    const bytes = readFileSync(file)
    return { file: path.relative(consoleDir, file), bytes: bytes.length, gzip_bytes: gzipped(bytes) }
  })
  const total = files.reduce(
    (sum, file) => ({ bytes: sum.bytes + file.bytes, gzip_bytes: sum.gzip_bytes + file.gzip_bytes }),
    { bytes: 0, gzip_bytes: 0 }
  )
  writeFileSync(path.join(consoleDir, "manifest.json"), `${JSON.stringify({ files, total }, null, 2)}\n`)
}
