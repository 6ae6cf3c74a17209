// Types for programs.mjs, which stays JavaScript so that set-up runs it before anything is installed.

export type ProgramName = "api" | "worker" | "webhooks" | "cli"

export interface Program {
  /** The TypeScript entry point, relative to the repository root. */
  readonly source: string
  /** Node flags the program always runs with. */
  readonly nodeArgs: ReadonlyArray<string>
  /** Environment variables the program always runs with, added to those it is given. */
  readonly env: Readonly<Record<string, string>>
}

export declare const ROOT: string
export declare const PROGRAMS: Readonly<Record<ProgramName, Program>>
export declare const compiledPath: (source: string) => string

export interface ProgramCommandOptions {
  /** More Node flags, after the program's own, such as `--cpu-prof`. */
  readonly nodeArgs?: ReadonlyArray<string>
  /** Arguments for the program itself. */
  readonly args?: ReadonlyArray<string>
}

/** `[file, args, env]` for `spawn`, run from the repository root; `env` is added to the environment given. */
export declare function programCommand(
  name: ProgramName,
  options?: ProgramCommandOptions
): [string, Array<string>, Readonly<Record<string, string>>]

export declare function ensureBuilt(log: (message: string) => void): boolean
