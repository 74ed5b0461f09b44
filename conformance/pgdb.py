"""Create or drop a scratch PostgreSQL database for the conformance stage.

    python conformance/pgdb.py create SERVER_URL NAME   # prints the new database's URL
    python conformance/pgdb.py drop   SERVER_URL NAME

SERVER_URL is a postgres:// URL of any database on the server whose role may create
databases (the maintenance database `postgres` will do). Uses pg8000 (pure Python), so
the stage does not need psql.
"""

from __future__ import annotations

import re
import sys
from urllib.parse import unquote, urlsplit, urlunsplit

import pg8000.exceptions
import pg8000.native

NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def connect(url: str) -> pg8000.native.Connection:
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise SystemExit(f"pgdb: not a postgres:// URL: {parts.scheme}://…")
    return pg8000.native.Connection(
        user=unquote(parts.username or "postgres"),
        password=unquote(parts.password) if parts.password is not None else None,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=unquote(parts.path.lstrip("/")) or "postgres",
        timeout=10,
    )


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in ("create", "drop"):
        print(__doc__, file=sys.stderr)
        return 2
    action, url, name = argv[1], argv[2], argv[3]
    if not NAME.match(name):
        raise SystemExit(f"pgdb: refusing the database name {name!r}")
    try:
        connection = connect(url)
    except (pg8000.exceptions.Error, OSError) as error:
        print(f"pgdb: cannot connect: {error}", file=sys.stderr)
        return 1
    try:
        if action == "create":
            connection.run(f'CREATE DATABASE "{name}"')
            print(with_database(url, name))
        else:
            connection.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except pg8000.exceptions.DatabaseError as error:
        print(f"pgdb: {action} {name} failed: {error}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
