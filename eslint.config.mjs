// Lint and format (`npm run lint`, run first by `npm test`). Formatting is dprint's, through
// @effect/eslint-plugin as in Effect's own repositories: `npm run lint:fix` applies it.
import effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import globals from "globals"
import tseslint from "typescript-eslint"

export default tseslint.config(
  {
    ignores: ["dist/", "packages/*/dist/", "node_modules/", ".data/", "coverage/", "bench/results/", "test/artifacts/"]
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...effect.configs.dprint,
  {
    languageOptions: { globals: globals.node },
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      // A package's index loads every module it has (see test/Imports.test.ts): take them one by one.
      "@effect/no-import-from-barrel-package": ["error", {
        packageNames: ["@effect/platform", "@effect/platform-node"]
      }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-non-null-assertion": "error",
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        destructuredArrayIgnorePattern: "^_",
        ignoreRestSiblings: true
      }]
    }
  },
  {
    // The console (D20) runs in browsers only.
    files: ["console/**"],
    languageOptions: { globals: globals.browser }
  }
)
