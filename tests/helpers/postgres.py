"""A real, throwaway PostgreSQL server for the store's tests, which run against SQLite and PostgreSQL.

`ThrowawayPostgres` makes a cluster of its own in a temporary folder (`initdb`), starts it on
127.0.0.1 only, on a free port, with its unix socket inside that folder (`pg_ctl start -w`, which
returns once the server accepts connections), and on exit stops it and deletes the folder. No
server the machine already runs is touched, and nothing is configured by hand.

- On a laptop: `apt-get install postgresql` (Debian's server binaries live in
  /usr/lib/postgresql/<version>/bin, off PATH: they are found there, newest first) and
  `pip install -r requirements.txt` (SQLAlchemy and the psycopg driver). Without either, the
  PostgreSQL tests skip and say which command to run; the SQLite ones run all the same.
- In CI (CI=true), `.ci/run` installs PostgreSQL as root, and a missing server fails the tests
  instead of skipping them. PostgreSQL refuses to run as root, so as root the cluster is made
  and run by the `postgres` user that Debian's package creates.

Fixtures: `postgres_server` (one cluster for the whole session, started on first use),
`postgres_url` (a fresh database on it per test) and `database_url` (each test twice: a SQLite
file, then a fresh PostgreSQL database). A test module or conftest imports the ones it uses.
"""
from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

INSTALL = "`apt-get install -y postgresql`, as .ci/run does"
SERVER_USER = "postgres"  # the unprivileged user Debian's package creates; the server runs as it under root


def _version(bin_dir: str) -> tuple[int, ...]:
    """(15,) for /usr/lib/postgresql/15/bin, (9, 6) for 9.6: sorts 10 above 9.6."""
    name = Path(bin_dir).parent.name
    return tuple(int(part) for part in name.split(".")) if name.replace(".", "").isdigit() else ()


def find_postgres() -> Path | None:
    """The folder holding both `initdb` and `pg_ctl` (so that both come from one version): the one
    on PATH first, then Debian's /usr/lib/postgresql/*/bin, newest version first; None if none."""
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)  # a symlink on PATH: its real folder has pg_ctl too
    for bin_dir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True):
        candidates.append(Path(bin_dir))
    for bin_dir in candidates:
        if (bin_dir / "initdb").is_file() and (bin_dir / "pg_ctl").is_file():
            return bin_dir
    return None


def require_postgres() -> Path:
    """PostgreSQL's server binaries' folder. Skip the test, saying why, where the server, its user
    (when running as root) or the Python driver is missing; in CI (CI=true), fail: CI never skips
    the PostgreSQL tests silently."""
    bin_dir = find_postgres()
    missing = None
    if bin_dir is None:
        missing = f"PostgreSQL's server (initdb, pg_ctl) is missing: {INSTALL}"
    elif os.geteuid() == 0 and not _user_exists(SERVER_USER):
        missing = f"running as root, PostgreSQL needs the `{SERVER_USER}` user, which is missing: {INSTALL}"
    else:
        try:
            import psycopg  # noqa: F401
            import sqlalchemy  # noqa: F401
        except ImportError as error:
            missing = f"the {error.name} package is missing: `pip install -r requirements.txt`"
    if missing is None:
        return bin_dir
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ThrowawayPostgres:
    """A PostgreSQL cluster of its own in a temporary folder, listening on 127.0.0.1:`port` only,
    where user `postgres` connects without a password. Use it as a context manager: on exit the
    server stops and the folder is deleted.

        with ThrowawayPostgres() as server:
            engine = sqlalchemy.create_engine(server.fresh_database())
    """

    def __init__(self, bin_dir: Path | None = None):
        self.bin_dir = bin_dir or find_postgres()
        if self.bin_dir is None:
            raise RuntimeError(f"PostgreSQL's server (initdb, pg_ctl) is missing: {INSTALL}")
        self.port = 0
        self.root: Path | None = None

    def __enter__(self) -> ThrowawayPostgres:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pg-"))
        try:
            if os.geteuid() == 0:  # PostgreSQL refuses to run as root: the folder becomes its user's
                user = pwd.getpwnam(SERVER_USER)
                os.chown(self.root, user.pw_uid, user.pw_gid)
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale")
            self.port = free_port()
            # fsync off: the cluster is thrown away, so a crash may lose it; -k: its socket stays in our folder
            options = (f"-h 127.0.0.1 -p {self.port} -k {shlex.quote(str(self.root))}"
                       " -c fsync=off -c synchronous_commit=off")
            self._run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.log), "-o", options)
        except BaseException:
            self._remove()
            raise

    def stop(self) -> None:
        if self.root is None:
            return
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))
        finally:
            self._remove()

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of `database` on this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def fresh_database(self) -> str:
        """Create an empty database with a name of its own and return its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop a database made by fresh_database, closing what a test left connected to it
        (WITH (FORCE): PostgreSQL 13 and newer), so that a long session's disk use stays flat."""
        name = url.rsplit("/", 1)[1]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, statement: str) -> None:
        import sqlalchemy

        # CREATE and DROP DATABASE cannot run inside a transaction
        engine = sqlalchemy.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(sqlalchemy.text(statement))
        finally:
            engine.dispose()

    def _run(self, program: str, *args: str) -> None:
        """Run one of PostgreSQL's programs, as its user when we are root; raise with its output
        and the server's log if it fails."""
        as_server_user = {}
        if os.geteuid() == 0:
            as_server_user = {"user": SERVER_USER, "group": SERVER_USER, "extra_groups": []}
        done = subprocess.run([str(self.bin_dir / program), *args], cwd=self.root, capture_output=True,
                              text=True, **as_server_user)  # cwd: root's own home may be closed to that user
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else "(no server log)"
            raise RuntimeError(f"{program} {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}\n--- server log ---\n{log}")

    def _remove(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the whole session, started by the first test that needs
    it. Without PostgreSQL or its driver the test skips, saying why; in CI it fails."""
    bin_dir = require_postgres()
    with ThrowawayPostgres(bin_dir) as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server):
    """The SQLAlchemy URL of a fresh, empty PostgreSQL database, dropped after the test."""
    url = postgres_server.fresh_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"], ids=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database's SQLAlchemy URL, once per backend: a SQLite file (a file, so that several
    connections share it as they share a server), then a fresh PostgreSQL database. PostgreSQL is
    asked for only here, so that `-k sqlite` never starts it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    url = server.fresh_database()
    yield url
    server.drop_database(url)
