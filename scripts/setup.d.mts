// Types for what tests import from setup.mjs, which stays JavaScript so that it runs before anything is installed.

/** The newest directory holding initdb, pg_ctl and postgres: PATH first, then Debian's layout; none when not installed. */
export declare function findPostgresBinDir(): string | undefined
