#!/usr/bin/env bash
# The database's roles (D14), run once by the postgres image when it initialises its data
# directory (mounted into /docker-entrypoint-initdb.d/ by docker-compose.yml), as the superuser,
# which nothing else uses:
#   account_api_migrator  owns the schema and every table, trigger and function it creates
#                         (`node dist/src/cli.js migrate`); not a superuser.
#   account_api_app      the API and the worker: reads and writes rows (SELECT, INSERT, UPDATE,
#                         DELETE on the tables, the sequences), LISTEN/NOTIFY; no DDL, no TRUNCATE,
#                         and, not owning the ledger, it cannot disable its append-only trigger.
# Passwords come from files (compose secrets) and are stored as SCRAM-SHA-256 verifiers.
# The same script runs against any server: PGHOST, PGPORT and PGPASSWORD as psql reads them.
set -euo pipefail

: "${POSTGRES_USER:?}" "${POSTGRES_DB:?}"
: "${MIGRATOR_PASSWORD_FILE:=/run/secrets/db_migrator_password}"
: "${APP_PASSWORD_FILE:=/run/secrets/db_app_password}"

read_secret() {
  local value
  value="$(tr -d '\r\n' < "$1")"
  if [ -z "$value" ]; then
    echo "init-roles: $1 is empty" >&2
    exit 1
  fi
  printf '%s' "$value"
}

psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v migrator_password="$(read_secret "$MIGRATOR_PASSWORD_FILE")" \
  -v app_password="$(read_secret "$APP_PASSWORD_FILE")" \
  -v database="$POSTGRES_DB" <<'SQL'
SET password_encryption = 'scram-sha-256';
CREATE ROLE account_api_migrator LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'migrator_password';
CREATE ROLE account_api_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'app_password';

-- Nobody else connects or creates in this database; PostgreSQL grants both to PUBLIC by default.
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE :"database" TO account_api_migrator, account_api_app;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
ALTER SCHEMA public OWNER TO account_api_migrator;
GRANT USAGE ON SCHEMA public TO account_api_app;

-- What the migrator creates, the app may read and write row by row.
ALTER DEFAULT PRIVILEGES FOR ROLE account_api_migrator IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO account_api_app;
ALTER DEFAULT PRIVILEGES FOR ROLE account_api_migrator IN SCHEMA public
  GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO account_api_app;
SQL
