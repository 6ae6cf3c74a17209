// Builds the programs (PROGRAMS in programs.mjs) into the folder given as the only argument: each
// entry point one ES module, `src/main.ts` as `<folder>/src/main.js`; and the console's page and
// assets into `<folder>/console/` (scripts/build-console.mjs). Run by ensureBuilt (npm
// start, npm test, the bench) and by the image's build, so both run the same files.
//
// Effect's packages are bundled in; every other package is imported from node_modules as it
// is. Effect's published modules carry their whole documentation as comments, often with
// characters above U+00FF, so V8 kept them as two-byte strings for the life of the process:
// compiled file by file (tsc), the API's heap held some 28 MB of module sources. Bundled, the
// comments go and strings are escaped to ASCII (test/Packaging.test.ts holds the few comments
// esbuild keeps to Latin-1): under the bench's HTTP and login suites the API's peak RSS fell
// from 283-296 MB (five runs) to 247-258 MB (ten), the worker's from ~185 to ~141 MB.
// Other packages stay outside because some of them find files beside their own (bull-board's
// UI, native addons, bullmq's package.json), which a bundle would move. Whitespace and names are
// kept, so a stack trace reads as the source does; `--enable-source-maps` maps it to the
// TypeScript.
import { build } from "esbuild"
import path from "node:path"
import { buildConsole } from "./build-console.mjs"
import { compiledName, PROGRAMS, ROOT } from "./programs.mjs"

const [outDir] = process.argv.slice(2)
if (outDir === undefined) throw new Error("usage: node scripts/build.mjs <output folder>")

const BUNDLED = /^(effect|@effect\/[^/]+)(\/|$)/

const OWN_RESOLUTION = Symbol("resolved by bundleEffectOnly")

/**
 * A bare specifier outside Effect stays an import, resolved by Node at run time from the
 * bundle's folder, when that finds the file the importer would have found. When it would not
 * (Effect's own fast-check 3, nested under `effect/`, where the root holds the tests' 4), the
 * importer's copy is bundled with it.
 */
const bundleEffectOnly = {
  name: "bundle-effect-only",
  setup(builder) {
    builder.onResolve({ filter: /^[^./]/ }, async ({ kind, path: specifier, pluginData, resolveDir }) => {
      if (pluginData === OWN_RESOLUTION || BUNDLED.test(specifier)) return undefined
      const resolveFrom = (folder) =>
        builder.resolve(specifier, { kind, resolveDir: folder, pluginData: OWN_RESOLUTION })
      const [fromImporter, fromBundle] = await Promise.all([resolveFrom(resolveDir), resolveFrom(ROOT)])
      return fromImporter.path === fromBundle.path ? { path: specifier, external: true } : undefined
    })
  }
}

await Promise.all([
  buildConsole(outDir),
  ...Object.values(PROGRAMS).map(({ source }) =>
    build({
      absWorkingDir: ROOT,
      entryPoints: [source],
      outfile: path.resolve(outDir, compiledName(source)),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node22",
      sourcemap: "linked",
      sourcesContent: false,
      plugins: [bundleEffectOnly],
      logLevel: "warning"
    })
  )
])
