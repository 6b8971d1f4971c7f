"""The SQLAlchemy engine as the store drives it: made from a URL (naming the driver to install where
one is missing), SQLite's settings and its own transactions, and the few statements that each
dialect writes its own way (an upsert, an insert of what is missing)."""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .faults import StoreError

BUSY_TIMEOUT_MS = 10_000  # SQLite: how long a write waits for another connection's lock
CONNECT_SECONDS = 5      # PostgreSQL: how long a connection may take before the database counts as away
# the package that installs each driver SQLAlchemy may name in a URL (pip's name, not the module's)
DRIVERS = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "pymysql": "PyMySQL", "asyncpg": "asyncpg",
           "mysqldb": "mysqlclient", "pg8000": "pg8000"}


def create_engine(url: str, **kwargs: Any) -> sa.Engine:
    """An engine for `url`; StoreError naming the package to install where its driver is missing. A
    PostgreSQL server that does not answer is given up after CONNECT_SECONDS, not the system's minutes."""
    try:
        if sa.engine.make_url(url).get_backend_name() == "postgresql":
            # the caller's own connect_args win over ours
            kwargs["connect_args"] = {"connect_timeout": CONNECT_SECONDS, **kwargs.get("connect_args", {})}
        return sa.create_engine(url, **kwargs)  # connects lazily: only a missing driver can fail here
    except (ModuleNotFoundError, ImportError, sa.exc.NoSuchModuleError) as err:
        raise driver_missing(url, err) from None
    except sa.exc.ArgumentError as err:
        raise StoreError("The database URL is not one SQLAlchemy understands ({error}).", error=str(err)) from None


def driver_missing(url: str, err: Exception) -> StoreError:
    """The error for a URL whose driver is not installed, naming what installs it."""
    try:
        parsed = sa.engine.make_url(url)
        driver = parsed.get_driver_name()
    except Exception:  # noqa: BLE001 - a URL that does not even parse: the import error names the module
        driver = getattr(err, "name", None) or str(err)
    return StoreError("The database URL needs the driver {driver}, which is not installed here. Install it (pip "
                      "install \"{package}\") and restart, or use another URL.", driver=driver,
                      package=DRIVERS.get(driver, driver))


# -- SQLite ----------------------------------------------------------------------------------------
def drive_sqlite(engine: sa.Engine) -> None:
    """Let the store drive an SQLite engine's connections and transactions (below); a no-op elsewhere."""
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_settings)  # each new connection of the pool
        sa.event.listen(engine, "begin", _sqlite_begin)       # each transaction: BEGIN, or BEGIN IMMEDIATE


def writing(engine: sa.Engine):
    """A transaction that writes: in SQLite it takes the write lock at its start (BEGIN IMMEDIATE), so
    that a transaction which reads and then writes never meets another writer halfway, which SQLite
    would refuse at once instead of waiting its busy timeout."""
    return engine.execution_options(minigpt_write=True).begin()


def _sqlite_settings(dbapi_connection, _record) -> None:
    """A busy timeout (a write waits its turn instead of failing), commits that a killed process cannot
    undo (WAL with synchronous NORMAL: not a power cut), foreign keys; and the transactions are the
    store's own (_sqlite_begin), not the driver's, which commits before any DDL. None of it writes to
    the file: a database that turns out to be newer or damaged is left as it was."""
    dbapi_connection.isolation_level = None  # the driver's autocommit: BEGIN is ours to say
    cursor = dbapi_connection.cursor()
    # read at each connect, not at import, so that a test may shorten it
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")  # SQLite ignores ON DELETE CASCADE without it
    cursor.close()


def _sqlite_begin(connection: sa.Connection) -> None:
    """SQLAlchemy's recipe for SQLite's own transactions; a write takes the write lock at once (writing)."""
    connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("minigpt_write")
                               else "BEGIN")


def use_wal(engine: sa.Engine) -> None:
    """Write-ahead logging, once the database is known to be ours (it stays set in the file): readers
    never wait for the writer, and a kill leaves the last commit."""
    raw = engine.raw_connection()  # journal_mode cannot change inside a transaction: the driver's own connection
    try:
        raw.driver_connection.execute("PRAGMA journal_mode = WAL")
    finally:
        raw.close()


# -- statements each dialect writes its own way ----------------------------------------------------
def upsert(connection: sa.Connection, table: sa.Table, values: dict, keys: list[str]) -> None:
    """Insert `values`, or replace the row with the same `keys`."""
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(connection.dialect.name)
    if dialect is None:  # any other database: delete and insert, in the same transaction
        where = sa.and_(*(table.c[k] == values[k] for k in keys))
        connection.execute(sa.delete(table).where(where))
        connection.execute(sa.insert(table).values(**values))
        return
    statement = dialect.insert(table).values(**values)
    changes = {k: v for k, v in values.items() if k not in keys}
    # a row that is all key (nothing to change) is kept as it is: DO UPDATE would need a column to set
    connection.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes) if changes
                       else statement.on_conflict_do_nothing(index_elements=keys))


def insert_missing(connection: sa.Connection, table: sa.Table, values: dict, keys: list[str]) -> None:
    """Insert `values` unless a row with the same `keys` is there already (it is left as it is)."""
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(connection.dialect.name)
    if dialect is not None:
        connection.execute(dialect.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys))
    # any other database: look, then insert, in the same transaction
    elif connection.execute(sa.select(table).where(sa.and_(*(table.c[k] == values[k] for k in keys)))).first() is None:
        connection.execute(sa.insert(table).values(**values))
