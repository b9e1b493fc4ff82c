"""Results derived from a store, kept in it, never read once anything they were derived from has changed.

A report is a pure function of the store's rows, the options it was asked with and the code that computes it,
so a report computed once can be shown again without the statistics (whose libraries take most of a second to
import). What makes that safe is the store's **token**: a random value SQLite itself replaces on every row
inserted, updated or deleted in any table but this module's two, through triggers this module creates on each
of them. Whatever writes the row (headroom, an older headroom, a plain ``sqlite3`` shell), the token changes:
nothing has to remember to invalidate anything. A schema change (a table dropped and made again, a column
added, a trigger dropped) changes SQLite's ``schema_version`` instead, which is part of the key too.

A result is stored under the token read before it was computed, and only if the token read after it is the
same: every read in between saw that one state of the store. Tokens are random (not a counter), so two copies
of one store file that each take a different write never share one: a result stored in one file, or keyed on
another file's token (``runs compare`` across two stores), names exactly one state of that file.

A store file can come from anyone (a colleague's run, a download), and whoever wrote it could also write a
result its rows do not support, under the right key. So each result carries an HMAC under a key of this user's
own (:func:`local_key`, made on first use, never in a store): a result this user's headroom did not store, or
one changed since, fails it and is computed again, as on any other miss.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE = "derived_state"
RESULTS = "derived_results"
#: The tables this module owns: writing them changes no token (storing a result must not void it).
OWN = (STATE, RESULTS)
_EVENTS = ("INSERT", "UPDATE", "DELETE")
_BUMP = f"UPDATE {STATE} SET token = lower(hex(randomblob(16))) WHERE id = 1"

#: One statement each (``executescript`` would commit the caller's transaction).
DDL = (
    f"""CREATE TABLE IF NOT EXISTS {STATE} (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    token  TEXT NOT NULL                   -- replaced by a trigger on every row change of every other table
)""",
    f"INSERT OR IGNORE INTO {STATE} (id, token) VALUES (1, lower(hex(randomblob(16))))",
    f"""CREATE TABLE IF NOT EXISTS {RESULTS} (
    kind   TEXT NOT NULL,                  -- what was derived: report, comparison, calibration
    key    TEXT NOT NULL,                  -- sha256 of the token(s), schema version, options and code version
    token  TEXT NOT NULL,                  -- this store's token when it was derived (older ones are removed)
    value  TEXT NOT NULL,                  -- the result as JSON
    mac    TEXT NOT NULL,                  -- HMAC-SHA256 of kind, key and value under this user's local key
    PRIMARY KEY (kind, key)
)""",
)


def _trigger_name(table: str, event: str) -> str:
    return f"{STATE}_{table}_{event.lower()}"


def _trigger_sql(table: str, event: str) -> str:
    return f'CREATE TRIGGER "{_trigger_name(table, event)}" AFTER {event} ON "{table}" FOR EACH ROW BEGIN {_BUMP}; END'


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()
    return sorted(str(r[0]) for r in rows if r[0] not in OWN)


def ensure(db: sqlite3.Connection) -> None:
    """Create the token, the results table and a trigger for each event on every other table (idempotent).

    Run on every writable open, after the schema and its migrations, so a table a later schema adds (or a
    migration rebuilds) gets its triggers without anyone listing it here. Nothing is written when all is in
    place; otherwise one transaction (the caller's, if it holds one), so the WAL takes the schema pages once.
    """
    have = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    missing = [(t, e) for t in _tables(db) for e in _EVENTS if _trigger_name(t, e) not in have]
    if not missing and STATE in have and RESULTS in have:
        return
    own = not db.in_transaction
    if own:
        db.execute("BEGIN IMMEDIATE")
    try:
        for statement in DDL:
            db.execute(statement)
        for table, event in missing:
            db.execute(_trigger_sql(table, event))
        if own:
            db.execute("COMMIT")
    except BaseException:
        if own:
            db.execute("ROLLBACK")
        raise


@dataclass(frozen=True)
class Version:
    """What a store's derived results are keyed on: its token and its schema version."""

    token: str
    schema_version: int


def version(db: sqlite3.Connection) -> Version | None:
    """The store's version now, or None when results cannot be trusted in it (no token, or a table whose
    changes would not change it: a trigger missing or not as this module writes it)."""
    try:
        row = db.execute(f"SELECT token FROM {STATE} WHERE id = 1").fetchone()
        if row is None:
            return None
        triggers = {
            str(r[0]): str(r[1]) for r in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        }
        for table in _tables(db):
            for event in _EVENTS:
                if triggers.get(_trigger_name(table, event)) != _trigger_sql(table, event):
                    return None
        schema = int(db.execute("PRAGMA schema_version").fetchone()[0])
    except sqlite3.DatabaseError:
        return None  # an older store without the table, or one that cannot be read: compute, never fail here
    return Version(str(row[0]), schema)


def key(kind: str, versions: list[Version], options: dict[str, Any], code: str) -> str:
    """The key of one derived result: the version of every store it reads, the options, the code's version."""
    text = json.dumps(
        {
            "kind": kind,
            "stores": [[v.token, v.schema_version] for v in versions],
            "options": options,
            "code": code,
        },
        sort_keys=True,
        allow_nan=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


KEY_FILE = "derived.key"


def local_key() -> bytes | None:
    """This user's key for the results' HMAC (``$HEADROOM_CACHE_DIR`` or ``~/.cache/headroom``, mode 0600,
    made on first use), or None where it can be neither read nor made: then nothing is stored or read."""
    path = Path(os.environ.get("HEADROOM_CACHE_DIR") or Path.home() / ".cache" / "headroom") / KEY_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            return local_key()
        except OSError:
            return None
        try:
            os.write(fd, secrets.token_bytes(32))
        finally:
            os.close(fd)
        data = path.read_bytes()
    except OSError:
        return None
    return data if len(data) == 32 else None


def _mac(secret: bytes, kind: str, key_: str, value: str) -> str:
    return hmac.new(secret, json.dumps([kind, key_, value]).encode(), hashlib.sha256).hexdigest()


def lookup(db: sqlite3.Connection, kind: str, key_: str) -> str | None:
    """The stored result under ``key_``, or None (also when its HMAC is not this user's headroom's)."""
    secret = local_key()
    if secret is None:
        return None
    try:
        row = db.execute(f"SELECT value, mac FROM {RESULTS} WHERE kind = ? AND key = ?", (kind, key_)).fetchone()
    except sqlite3.DatabaseError:
        return None
    if row is None or not hmac.compare_digest(str(row[1]), _mac(secret, kind, key_, str(row[0]))):
        return None
    return str(row[0])


def save(path: Path, kind: str, key_: str, derived_from: Version, value: str) -> bool:
    """Store ``value`` in the store at ``path`` if it is still at ``derived_from``; False when it was not stored.

    Best effort by design: a read-only store, a busy one, an older or newer schema, or any SQLite error leaves
    the store as it was and the caller's output unchanged. Its own connection, so a report that opened the
    store read-only can still keep what it computed.
    """
    from orchestrator.store.sqlite import APPLICATION_ID, SCHEMA_VERSION, read_only_reason

    secret = local_key()
    if secret is None or read_only_reason(path) is not None:
        return False
    try:
        db = sqlite3.connect(path, timeout=2, isolation_level=None)
    except sqlite3.DatabaseError:
        return False
    try:
        if (
            db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID
            or db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION
        ):
            return False  # another application's file, or a schema this code would have to migrate first
        db.execute("BEGIN IMMEDIATE")
        try:
            if version(db) != derived_from:
                # Changed since (or never set up: then set up now, and a later report stores its result).
                ensure(db)
                db.execute("COMMIT")
                return False
            db.execute(f"DELETE FROM {RESULTS} WHERE token != ?", (derived_from.token,))
            db.execute(
                f"INSERT OR REPLACE INTO {RESULTS} (kind, key, token, value, mac) VALUES (?, ?, ?, ?, ?)",
                (kind, key_, derived_from.token, value, _mac(secret, kind, key_, value)),
            )
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise
    except sqlite3.DatabaseError:
        return False
    finally:
        db.close()


def clear(db: sqlite3.Connection) -> None:
    """Remove every stored result (the benchmark's cold case); the token is left as it is."""
    db.execute(f"DELETE FROM {RESULTS}")
