// Types for what tests import from setup.mjs, which stays JavaScript so that it runs before anything is installed.

/** The newest directory holding initdb, pg_ctl and postgres: PATH first, then Debian's layout; none when not installed. */
export declare function findPostgresBinDir(): string | undefined

/** Installs the repository's dependencies (npm ci) unless package.json and the lockfile are those last installed. */
export declare function ensureDependencies(): void
