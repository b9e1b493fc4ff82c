"""The embedded store: one SQLite file in WAL mode.

Crash safety comes from the order of writes: a try is recorded as ``running``
before it starts and flipped to ``finished`` (with its result and evidence) in
one transaction. A run killed with ``kill -9`` leaves ``running`` rows, which a
resume marks ``abandoned`` (kept on record, never counted) and runs again.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from orchestrator.contract.outputs import usage_value
from orchestrator.errors import UserError
from orchestrator.processes import pid_alive
from orchestrator.spec.evidence import Overcommit, evidence_path, read_stored
from orchestrator.spec.facts import GATEWAY, SELF_REPORTED, TrialFacts
from orchestrator.spec.outcome import current_outcome
from orchestrator.spec.provenance import CanaryVerdict, Paused, Provenance, RunTask
from orchestrator.spec.provenance import read_stored as read_provenance
from orchestrator.spec.resources import TASK_BAND, ResourceConfig
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial, Verdict
from orchestrator.store import derived
from orchestrator.store.base import RunStatus, TryRecord
from orchestrator.store.records import AXES, ExecutionRecord, RunRecord, TaskRecord, TrialRecord, content_digest

if TYPE_CHECKING:  # pandas loads with the first frame read: `headroom --help` and `runs` stay fast
    import pandas as pd


APPLICATION_ID = 1213415757  # 'HRDM', set by schema.sql
_SCHEMA_SQL = files("orchestrator.store").joinpath("schema.sql").read_text()
#: The schema version this code writes (schema.sql's user_version). A newer store is refused, never downgraded.
SCHEMA_VERSION = int(re.search(r"PRAGMA user_version = (\d+)", _SCHEMA_SQL).group(1))  # type: ignore[union-attr]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    name: str
    status: str
    created_at: str
    finished_at: str | None
    backend: str
    enforcement: str
    spec: dict[str, Any]
    axis: str = "resources"  # resources (a sweep) | labels (agents, models, imports)
    owner: str | None = None  # host:pid of the process executing it, while one does (claim/release)


def read_only_reason(path: Path) -> str | None:
    """Why ``path`` (a store file, existing or not) cannot be written, or None if it can."""
    where = path if path.exists() else path.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return "on a read-only file system"
    except OSError:
        return None
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    if not os.access(where if where.is_dir() else where.parent, os.W_OK):
        return "its directory is not writable (SQLite needs its journal files beside it)"
    return None


def store_error(exc: sqlite3.DatabaseError) -> str:
    """SQLite's words, and what they mean for a store."""
    text = str(exc)
    if "disk is full" in text or "disk I/O error" in text:
        return f"the disk under the store failed ({text}); free space and resume the run"
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return f"the store is corrupt ({text})"
    if "readonly" in text or "read-only" in text:
        return f"the store is read-only ({text})"
    return text


class Store:
    def __init__(self, path: Path | str, *, read_only: bool = False) -> None:
        self.path = Path(path)
        try:
            if read_only:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                if read_only_reason(self.path):
                    # Nothing can write a store on a read-only location, and SQLite cannot make the
                    # WAL index there: read it as the immutable file it is.
                    uri += "&immutable=1"
                self.db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            else:
                if (why := read_only_reason(self.path)) is not None:
                    raise UserError(
                        f"the store is read-only ({why}); copy it to a writable place to continue", file=str(self.path)
                    )
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self._check_version()
            if not read_only:
                # A headroom store carries its application id from birth; any other non-empty
                # database belongs to someone else and must not be touched.
                app_id = self.db.execute("PRAGMA application_id").fetchone()[0]
                has_tables = self.db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
                if app_id != APPLICATION_ID and (app_id != 0 or has_tables):
                    raise UserError("not a headroom store (another application's database)", file=str(self.path))
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.execute("PRAGMA foreign_keys=ON")
                version = self.db.execute("PRAGMA user_version").fetchone()[0]
                self.db.executescript(_SCHEMA_SQL)
                if has_tables and version < SCHEMA_VERSION:
                    self._migrate(version)
                # After the schema and any migration: every table then has the triggers that void stored reports.
                derived.ensure(self.db)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"cannot use as a headroom store: {store_error(exc)}", file=str(self.path)) from None
        except OSError as exc:
            raise UserError(f"cannot create the store ({exc.strerror})", file=str(self.path)) from None

    def _migrate(self, version: int) -> None:
        """Bring an older store up to this schema, in place (schema.sql only creates what is missing)."""
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
        if version < 2 and "axis" not in columns:
            self.db.execute("ALTER TABLE runs ADD COLUMN axis TEXT NOT NULL DEFAULT 'resources'")
        if version < 3:
            with self._tx():
                present = {r[1] for r in self.db.execute("PRAGMA table_info(executions)")}
                for name, kind in OVERCOMMIT_COLUMNS.items():
                    if name not in present:
                        self.db.execute(f"ALTER TABLE executions ADD COLUMN {name} {kind}")
                self.db.execute(f"""UPDATE executions SET {
                    ", ".join(f"{c} = ({OVERCOMMIT_FROM_EVIDENCE[c]})" for c in OVERCOMMIT_COLUMNS)
                }
                                    WHERE EXISTS (SELECT 1 FROM evidence v WHERE {_SAME_TRY})""")
        if version < 4:
            # Usage recorded before schema 4 came from the agent's own report (there was no gateway).
            with self._tx():
                if "usage_source" not in {r[1] for r in self.db.execute("PRAGMA table_info(executions)")}:
                    self.db.execute("ALTER TABLE executions ADD COLUMN usage_source TEXT")
                self.db.execute(
                    f"UPDATE executions SET usage_source = '{SELF_REPORTED}' WHERE usage_source IS NULL "
                    "AND (tokens_in IS NOT NULL OR tokens_out IS NOT NULL OR cost_usd IS NOT NULL)"
                )
        if version < 5:  # after every earlier step: the rebuild copies the columns they added
            self._migrate_times_and_source_runs()
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _migrate_times_and_source_runs(self) -> None:
        """Schema 5: a time that was not recorded is NULL, never ''; imported trials name their source run.

        SQLite cannot drop a NOT NULL constraint in place, so ``executions`` is rebuilt from
        schema.sql's definition (in one transaction) and every '' time becomes NULL.
        """
        ddl = re.search(r"CREATE TABLE IF NOT EXISTS executions \((.*?)\n\);", _SCHEMA_SQL, re.S)
        assert ddl is not None  # schema.sql defines it
        with self._tx():
            if "source_run" not in {r[1] for r in self.db.execute("PRAGMA table_info(trials)")}:
                self.db.execute("ALTER TABLE trials ADD COLUMN source_run TEXT")
            self.db.execute(f"CREATE TABLE executions_v5 ({ddl.group(1)}\n)")
            cols = ", ".join(EXECUTION_COLUMNS)
            self.db.execute(f"INSERT INTO executions_v5 ({cols}) SELECT {cols} FROM executions")
            self.db.execute("DROP TABLE executions")
            self.db.execute("ALTER TABLE executions_v5 RENAME TO executions")
            self.db.execute("CREATE INDEX IF NOT EXISTS executions_final ON executions(run_id, final)")
            self.db.execute("UPDATE executions SET started_at = NULL WHERE started_at = ''")
            self.db.execute("UPDATE executions SET finished_at = NULL WHERE finished_at = ''")

    def _check_version(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(
                f"written by a newer headroom (store schema {version}, this version reads up to "
                f"{SCHEMA_VERSION}); upgrade headroom to use it",
                file=str(self.path),
            )

    def verify(self, run_id: str, recorded: int) -> str | None:
        """After a sweep: does a fresh connection see a sound file holding every result this process recorded?

        A WAL truncated or lost under a running sweep would otherwise go unnoticed until
        the next reader found fewer results than the sweep reported.
        """
        try:
            fresh = sqlite3.connect(self.path, timeout=30)
            try:
                check = fresh.execute("PRAGMA quick_check").fetchone()[0]
                if check != "ok":
                    return f"the store is corrupt ({check})"
                held = fresh.execute(
                    "SELECT COUNT(*) FROM executions WHERE run_id=? AND status='finished'", (run_id,)
                ).fetchone()[0]
            finally:
                fresh.close()
        except sqlite3.DatabaseError as exc:
            return store_error(exc)
        if held < recorded:
            return f"the store holds {held} results of this run but {recorded} were recorded: data was lost"
        return None

    @classmethod
    def open_existing(cls, path: Path | str) -> Store:
        """Open a store to read it (report, runs, compare): never creates or changes anything."""
        p = Path(path)
        if not p.is_file():
            raise UserError("no such store (run `headroom sweep` first)", file=str(p))
        store = cls(p, read_only=True)
        try:
            if store.db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                raise UserError("not a headroom store", file=str(p))
        except sqlite3.DatabaseError as exc:
            raise UserError(f"not a headroom store ({exc})", file=str(p)) from None
        return store

    @classmethod
    def open_for_resume(cls, path: Path | str) -> Store:
        Store.open_existing(path).close()  # the same checks, before anything is written
        return cls(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -----------------------------------------------------------------------
    def create_run(
        self,
        *,
        name: str,
        backend: str,
        enforcement: str,
        spec: dict[str, Any],
        provenance: Provenance,
        tasks: list[Task],
        trials: list[Trial],
        axis: str = "resources",
    ) -> str:
        """Write a run, its provenance and its whole plan in one transaction: all or nothing."""
        run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        with self._tx():
            self.db.execute(
                "INSERT INTO runs (run_id, name, created_at, finished_at, status, backend, enforcement, spec_json, owner, axis)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    name,
                    now(),
                    None,
                    "planned",
                    backend,
                    enforcement,
                    json.dumps(spec, sort_keys=True),
                    None,
                    axis,
                ),
            )
            self.db.execute(
                "INSERT INTO provenance VALUES (?,?)", (run_id, json.dumps(provenance.to_stored(), sort_keys=True))
            )
            self.db.executemany(
                "INSERT INTO tasks VALUES (?,?,?,?,?)",
                [(run_id, t.id, t.digest, t.cluster_id, t.spec.model_dump_json()) for t in tasks],
            )
            self.db.executemany(
                f"INSERT INTO trials ({TRIAL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (
                        run_id,
                        t.trial_id,
                        t.task_id,
                        t.config.label,
                        t.config.request_multiplier,
                        t.config.limit_multiplier,
                        t.attempt,
                        t.seed,
                        t.order,
                    )
                    for t in trials
                ],
            )
        return run_id

    def claim(self, run_id: str) -> None:
        """Take a run for execution; refuse while another live process executes it.

        Without this, a resume started while the first process still runs would
        mark that process's tries abandoned and run them a second time.
        """
        me = f"{socket.gethostname()}:{os.getpid()}"
        with self._tx():
            row = self.db.execute("SELECT owner FROM runs WHERE run_id=?", (run_id,)).fetchone()
            owner = row["owner"] if row else None
            if owner and owner != me:
                host, _, pid = owner.rpartition(":")
                if host != socket.gethostname() or pid_alive(int(pid)):
                    raise UserError(
                        f"run {run_id} is being executed by process {owner}; wait for it or stop it first",
                        file=str(self.path),
                    )
            self.db.execute("UPDATE runs SET owner=? WHERE run_id=?", (me, run_id))

    def release(self, run_id: str) -> None:
        self.db.execute("UPDATE runs SET owner=NULL WHERE run_id=?", (run_id,))

    def set_status(self, run_id: str, status: RunStatus) -> None:
        finished = now() if status == "finished" else None
        self.db.execute("UPDATE runs SET status=?, finished_at=? WHERE run_id=?", (status, finished, run_id))

    def runs(self) -> list[RunInfo]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY created_at").fetchall()
        return [
            RunInfo(
                r["run_id"],
                r["name"],
                r["status"],
                r["created_at"],
                r["finished_at"],
                r["backend"],
                r["enforcement"],
                json.loads(r["spec_json"]),
                r["axis"] if "axis" in r.keys() else "resources",  # a read-only store from before schema 2
                r["owner"],
            )
            for r in rows
        ]

    def run_summaries(self) -> dict[str, dict[str, Any]]:
        """Per run: trials planned, final results, passes among them, and the last try's start or end (its heartbeat).

        What `headroom runs` lists; three grouped scans, so a large store still lists at once.
        """
        out: dict[str, dict[str, Any]] = {
            r[0]: {"planned": int(r[1]), "final": 0, "passed": 0, "last_activity": None}
            for r in self.db.execute("SELECT run_id, COUNT(*) FROM trials GROUP BY run_id")
        }
        for run_id, final, passed in self.db.execute(
            "SELECT run_id, COUNT(*), SUM(outcome = 'passed') FROM executions WHERE final = 1 GROUP BY run_id"
        ):
            out.setdefault(run_id, {"planned": 0, "last_activity": None}).update(
                final=int(final), passed=int(passed or 0)
            )
        for run_id, last in self.db.execute(
            "SELECT run_id, MAX(COALESCE(finished_at, started_at)) FROM executions GROUP BY run_id"
        ):
            out.setdefault(run_id, {"planned": 0, "final": 0, "passed": 0})["last_activity"] = last
        return out

    def run(self, run_id: str | None = None) -> RunInfo:
        runs = self.runs()
        if not runs:
            raise UserError("store holds no runs", file=str(self.path))
        if run_id is None:
            return runs[-1]
        for r in runs:
            if r.run_id == run_id:
                return r
        raise UserError(f"no run {run_id!r} (have: {', '.join(r.run_id for r in runs)})", file=str(self.path))

    def append_canary_resumed(self, run_id: str, canary: CanaryVerdict) -> None:
        """Add the canary of a ``--resume`` to a run's provenance; the canary of its start stays as it was."""
        self._update_provenance(run_id, lambda p: setattr(p, "canary_resumed", [*p.canary_resumed, canary]))

    def append_paused(self, run_id: str, paused: Paused) -> None:
        """Add a pause of the sweep (the model gateway's circuit breaker) to a run's provenance."""
        self._update_provenance(run_id, lambda p: setattr(p, "paused", [*p.paused, paused]))

    def _update_provenance(self, run_id: str, change: Callable[[Provenance], None]) -> None:
        # Read, change and write in one transaction; the row is re-stored at this version (what an older
        # version held that no field does stays in its legacy part).
        with self._tx():
            prov = self._stored_provenance(run_id)
            change(prov)
            self.db.execute(
                "UPDATE provenance SET json=? WHERE run_id=?", (json.dumps(prov.to_stored(), sort_keys=True), run_id)
            )

    def _stored_provenance(self, run_id: str) -> Provenance:
        row = self.db.execute("SELECT json FROM provenance WHERE run_id=?", (run_id,)).fetchone()
        try:
            return read_provenance(json.loads(row["json"]) if row else {})
        except ValidationError as exc:  # a newer headroom's row, or one no headroom wrote: one line, no traceback
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UserError(
                f"run {run_id}: its provenance cannot be read ({where + ': ' if where else ''}{first['msg']})",
                file=str(self.path),
            ) from None

    def provenance(self, run_id: str) -> Provenance:
        """A run's provenance as stored by any version of headroom, with its tasks (digest, cluster, the task's
        own [provenance]) from the tasks table."""
        prov = self._stored_provenance(run_id)
        prov.tasks = {
            r["task_id"]: RunTask(
                digest=r["digest"],
                cluster_id=r["cluster_id"],
                provenance=json.loads(r["spec_json"]).get("provenance") or {},
            )
            for r in self.db.execute("SELECT * FROM tasks WHERE run_id=? ORDER BY task_id", (run_id,))
        }
        return prov

    # -- trials and tries --------------------------------------------------------------
    def planned(self, run_id: str) -> list[Trial]:
        return [
            Trial(
                trial_id=r["trial_id"],
                task_id=r["task_id"],
                config=(
                    ResourceConfig(kind=TASK_BAND)
                    if r["config_label"] == TASK_BAND
                    else ResourceConfig(
                        request_multiplier=r["request_multiplier"], limit_multiplier=r["limit_multiplier"]
                    )
                ),
                attempt=r["attempt"],
                seed=r["seed"],
                order=r["ord"],
            )
            for r in self.db.execute("SELECT * FROM trials WHERE run_id=? ORDER BY ord", (run_id,))
        ]

    def abandon_try(self, run_id: str, trial_id: str, try_index: int) -> bool:
        cur = self.db.execute(
            "UPDATE executions SET status='abandoned', finished_at=? WHERE run_id=? AND trial_id=? AND try=? AND status='running'",
            (now(), run_id, trial_id, try_index),
        )
        return cur.rowcount == 1

    def abandon_running(self, run_id: str) -> int:
        """Tries left 'running' by a crash: keep them on record, never count them."""
        cur = self.db.execute(
            "UPDATE executions SET status='abandoned', finished_at=? WHERE run_id=? AND status='running'",
            (now(), run_id),
        )
        return cur.rowcount

    def tries(self, run_id: str) -> dict[str, list[TryRecord]]:
        out: dict[str, list[TryRecord]] = {}
        for r in self.db.execute(
            "SELECT trial_id, try, status, outcome, reason, final FROM executions WHERE run_id=? ORDER BY trial_id, try",
            (run_id,),
        ):
            out.setdefault(r["trial_id"], []).append(
                TryRecord(
                    r["trial_id"], r["try"], r["status"], bool(r["final"]), *current_outcome(r["outcome"], r["reason"])
                )
            )
        return out

    def start_try(self, run_id: str, trial_id: str, try_index: int) -> None:
        self.db.execute(
            "INSERT INTO executions (run_id, trial_id, try, status, started_at) VALUES (?,?,?,?,?)",
            (run_id, trial_id, try_index, "running", now()),
        )

    def finish_try(
        self, run_id: str, trial_id: str, try_index: int, facts: TrialFacts, verdict: Verdict, final: bool
    ) -> bool:
        """Record a try's result; False (and nothing written) if the try is no longer running."""
        *usage, source = usage_columns(facts)
        with self._tx():
            cur = self.db.execute(
                """UPDATE executions SET status='finished', final=?, finished_at=?, outcome=?, reason=?, reward=?,
                   enforcement=?, qos_class=?, request_cpus=?, request_memory_bytes=?, limit_cpus=?, limit_memory_bytes=?,
                   peak_memory_bytes=?, cpu_time_s=?, duration_s=?, tokens_in=?, tokens_out=?, cost_usd=?,
                   overcommit_ratio=?, overcommit_beside_unbounded=?, overcommit_memory_pressure=?, usage_source=?
                   WHERE run_id=? AND trial_id=? AND try=? AND status='running'""",
                (
                    int(final),
                    now(),
                    verdict.outcome.value,
                    verdict.reason.value if verdict.reason else None,
                    facts.reward,
                    facts.enforcement,
                    facts.qos_class,
                    facts.request_cpus,
                    facts.request_memory_bytes,
                    facts.limit_cpus,
                    facts.limit_memory_bytes,
                    facts.peak_memory_bytes,
                    facts.cpu_time_s,
                    facts.duration_s,
                    *usage,
                    *overcommit_values(facts.extra.overcommit),
                    source,
                    run_id,
                    trial_id,
                    try_index,
                ),
            )
            if cur.rowcount != 1:
                return False
            self.db.execute(
                "INSERT OR REPLACE INTO evidence VALUES (?,?,?,?)",
                (run_id, trial_id, try_index, facts.model_dump_json()),
            )
        return True

    def evidence(self, run_id: str, trial_id: str) -> list[dict[str, Any]]:
        return [
            {"try": r["try"], **json.loads(r["json"])}
            for r in self.db.execute(
                "SELECT * FROM evidence WHERE run_id=? AND trial_id=? ORDER BY try", (run_id, trial_id)
            )
        ]

    def final_results(self, run_id: str) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
        """(trial_id, outcome, reason, raw facts) of every trial's final try, in plan order.

        The outcome is None only where a bundle imported a final try without one (the column allows it).
        """
        return [
            (r["trial_id"], *current_outcome(r["outcome"], r["reason"]), json.loads(r["json"]))
            for r in self.db.execute(
                """SELECT e.trial_id, e.outcome, e.reason, v.json FROM executions e
                   JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try
                   JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
                   WHERE e.run_id = ? AND e.final = 1 ORDER BY t.ord""",
                (run_id,),
            )
        ]

    def task_specs(self, run_id: str) -> list[Task]:
        """The run's tasks as recorded (spec and digest; not their files)."""
        from orchestrator.spec.task import TaskSpec
        from orchestrator.spec.unknown import RECORDED

        return [
            Task(
                id=r["task_id"],
                path="",
                # as recorded: a key an older headroom accepted is history, not a typo to refuse now
                spec=TaskSpec.model_validate_json(r["spec_json"], context={RECORDED: True}),
                instruction="",
                digest=r["digest"],
            )
            for r in self.db.execute("SELECT * FROM tasks WHERE run_id=? ORDER BY task_id", (run_id,))
        ]

    # -- analysis input ------------------------------------------------------------------
    def trial_frame(self, run_id: str) -> pd.DataFrame:
        """One row per planned trial with a final result: the statistics' input (see orchestrator.stats).

        Built for a million rows: read column by column (orchestrator.store.frame).
        Cost, tokens and time include the trial's retried tries.
        """
        from orchestrator.store.frame import read_trial_frame

        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        return read_trial_frame(
            self.path,
            run_id,
            immutable=read_only_reason(self.path) is not None,
            with_overcommit=version >= 3,
            with_usage_source=version >= 4,
            with_source_run=version >= 5,
        )

    def rule_frame(self, run_id: str) -> pd.DataFrame:
        """The trial frame plus, for an imported run, each trial's own verdict as its source recorded it.

        The scoring rules (orchestrator.stats.scoring_rules) read these columns: the source format,
        Terminal-Bench's ``is_resolved`` and ``failure_mode``, Harbor's exception type and rewards.
        A native run carries none; its trials are read by their outcomes.
        """
        df = self.trial_frame(run_id)
        if not self.run(run_id).backend.startswith("import:") or df.empty:
            return df
        rows = self.db.execute(
            """SELECT t.ord, json_extract(v.json, '$.source'), json_extract(v.json, '$.is_resolved'),
                      json_extract(v.json, '$.failure_mode'), json_extract(v.json, '$.exception.type'),
                      json_extract(v.json, '$.rewards')
               FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
               JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try
               WHERE e.run_id = ? AND e.final = 1""",
            (run_id,),
        ).fetchall()
        import pandas as pd

        src = pd.DataFrame(
            [tuple(r) for r in rows],
            columns=["plan_order", "source_kind", "tb_resolved", "tb_mode", "h_exception", "h_rewards"],
        )
        return df.merge(src, on="plan_order", how="left")

    def cpu_frame(self, run_id: str) -> pd.DataFrame:
        """Per final try: CPU time, the steps' wall time and the quota's throttling (orchestrator.store.cpu)."""
        from orchestrator.store.cpu import cpu_frame

        return cpu_frame(self.db, run_id)

    def finished_labels(self, run_id: str) -> set[str]:
        """Configurations with at least one final result."""
        return {
            r[0]
            for r in self.db.execute(
                """SELECT DISTINCT t.config_label FROM executions e
               JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
               WHERE e.run_id = ? AND e.final = 1""",
                (run_id,),
            )
        }

    def planned_count(self, run_id: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM trials WHERE run_id=?", (run_id,)).fetchone()[0])

    def try_counts(self, run_id: str) -> dict[str, int]:
        """Raw accounting of every try: results, retried tries, abandoned and still-running ones.

        A final try is always a finished one, so the big class is an index-only count and
        only the few non-final tries are read.
        """
        final = self.db.execute("SELECT COUNT(*) FROM executions WHERE run_id=? AND final=1", (run_id,)).fetchone()[0]
        other = dict(
            self.db.execute(
                "SELECT status, COUNT(*) FROM executions INDEXED BY executions_final WHERE run_id=? AND final=0 GROUP BY status",
                (run_id,),
            ).fetchall()
        )
        counts = {
            "final": int(final),
            "retried": int(other.get("finished", 0)),
            "abandoned": int(other.get("abandoned", 0)),
            "running": int(other.get("running", 0)),
        }
        return {"all_tries": int(final) + sum(int(v) for v in other.values()), **counts}

    # -- whole runs made elsewhere (imports, bundles) -------------------------------------
    def imported_sources(self) -> list[dict[str, Any]]:
        """Every source an import wrote into this store: its content digest, name, run and when it was imported.

        Read from the runs' import provenance; an entry written before sources carried a ``digest`` gets it
        computed from its per-file digests (the same function), so older imports are recognised too.
        """
        rows = self.db.execute(
            "SELECT p.run_id, r.name, json_extract(p.json, '$.import.imported_at'), s.value "
            "FROM (SELECT run_id, json FROM provenance WHERE json_valid(json)) p JOIN runs r ON r.run_id = p.run_id, "
            "json_each(p.json, '$.import.sources') s ORDER BY r.created_at"
        ).fetchall()
        out = []
        for run_id, run_name, imported_at, value in rows:
            src = json.loads(value) if isinstance(value, str) else {}
            if not isinstance(src, dict):
                continue
            files = src.get("files_sha256")
            digest = src.get("digest") or (
                content_digest(files.values()) if isinstance(files, dict) and files else None
            )
            if digest:
                out.append(
                    {
                        "digest": digest,
                        "source": src.get("name"),
                        "path": src.get("path"),
                        "run_id": run_id,
                        "run_name": run_name,
                        "imported_at": imported_at,
                    }
                )
        return out

    def import_run(
        self, run: RunRecord, tasks: list[TaskRecord], trials: list[TrialRecord], *, new_sources: Collection[str] = ()
    ) -> str:
        """Write a complete run (run, provenance, tasks, trials, every try and its evidence) in one transaction.

        Each trial needs exactly one finished try with ``final`` set, or the reports would
        count it as unfinished; a record that breaks this is refused before anything is written.
        ``new_sources``: content digests of sources that must not be in the store yet; checked inside the
        transaction, so two imports of one source at once cannot both write it.
        """
        if run.axis not in AXES:
            raise ValueError(f"axis must be one of {AXES}, not {run.axis!r}")
        for t in trials:
            finals = [e for e in t.executions if e.final]
            if len(finals) != 1 or finals[0].status != "finished" or finals[0].outcome is None:
                raise ValueError(f"trial {t.trial_id}: needs exactly one finished final try with an outcome")
        run_id = run.run_id or f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        with self._tx():
            if new_sources:
                held = {h["digest"]: h for h in self.imported_sources()}
                if again := [held[d] for d in new_sources if d in held]:
                    raise UserError(
                        f"{again[0]['source']} was imported meanwhile (run {again[0]['run_id']}); nothing written "
                        "(run the import again, or give --again to import it twice)",
                        file=str(self.path),
                    )
            self.db.execute(
                "INSERT INTO runs (run_id, name, created_at, finished_at, status, backend, enforcement, spec_json, owner, axis)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    run.name,
                    run.created_at or now(),
                    run.finished_at or now(),
                    run.status,
                    run.backend,
                    run.enforcement,
                    json.dumps(run.spec, sort_keys=True),
                    None,
                    run.axis,
                ),
            )
            self.db.execute(
                "INSERT INTO provenance VALUES (?,?)", (run_id, json.dumps(run.provenance.to_stored(), sort_keys=True))
            )
            self.db.executemany(
                "INSERT INTO tasks VALUES (?,?,?,?,?)",
                [(run_id, t.task_id, t.digest, t.cluster_id, json.dumps(t.spec, sort_keys=True)) for t in tasks],
            )
            self.db.executemany(
                f"INSERT INTO trials ({TRIAL_COLUMNS}, source_run) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        run_id,
                        t.trial_id,
                        t.task_id,
                        t.config_label,
                        t.request_multiplier,
                        t.limit_multiplier,
                        t.attempt,
                        t.seed,
                        t.order,
                        t.source_run,
                    )
                    for t in trials
                ],
            )
            rows, evidence = [], []
            for t in trials:
                for e in t.executions:
                    rows.append(
                        (
                            run_id,
                            t.trial_id,
                            e.try_index,
                            e.status,
                            int(e.final),
                            e.started_at,
                            e.finished_at,
                            *current_outcome(e.outcome, e.reason),
                            e.reward,
                            e.enforcement,
                            e.qos_class,
                            e.request_cpus,
                            e.request_memory_bytes,
                            e.limit_cpus,
                            e.limit_memory_bytes,
                            e.peak_memory_bytes,
                            e.cpu_time_s,
                            e.duration_s,
                            _capped("tokens_in", e.tokens_in),
                            _capped("tokens_out", e.tokens_out),
                            _capped("cost_usd", e.cost_usd),
                            *overcommit_values(stored_overcommit(e.evidence)),
                            e.usage_source
                            or (
                                SELF_REPORTED if (e.tokens_in, e.tokens_out, e.cost_usd) != (None, None, None) else None
                            ),
                        )
                    )
                    if e.evidence is not None:
                        evidence.append((run_id, t.trial_id, e.try_index, json.dumps(e.evidence, sort_keys=True)))
            self.db.executemany(
                f"INSERT INTO executions ({', '.join(EXECUTION_COLUMNS)}) "
                f"VALUES ({','.join('?' * len(EXECUTION_COLUMNS))})",
                rows,
            )
            self.db.executemany("INSERT INTO evidence VALUES (?,?,?,?)", evidence)
        return run_id

    def export_run(self, run_id: str) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
        """Every row of a run as records: the inverse of :meth:`import_run` (bundles are built from it)."""
        info = self.run(run_id)
        prov_row = self.db.execute("SELECT json FROM provenance WHERE run_id=?", (run_id,)).fetchone()
        run = RunRecord(
            name=info.name,
            backend=info.backend,
            enforcement=info.enforcement,
            axis=info.axis,
            spec=info.spec,
            provenance=read_provenance(json.loads(prov_row["json"]) if prov_row else {}),
            status=info.status,
            created_at=info.created_at,
            finished_at=info.finished_at,
            run_id=run_id,
        )
        tasks = [
            TaskRecord(r["task_id"], r["digest"], r["cluster_id"], json.loads(r["spec_json"]))
            for r in self.db.execute("SELECT * FROM tasks WHERE run_id=? ORDER BY task_id", (run_id,))
        ]
        evidence = {
            (r["trial_id"], r["try"]): json.loads(r["json"])
            for r in self.db.execute("SELECT * FROM evidence WHERE run_id=?", (run_id,))
        }
        tries: dict[str, list[ExecutionRecord]] = {}
        for r in self.db.execute("SELECT * FROM executions WHERE run_id=? ORDER BY trial_id, try", (run_id,)):
            tries.setdefault(r["trial_id"], []).append(
                ExecutionRecord(
                    try_index=r["try"],
                    status=r["status"],
                    final=bool(r["final"]),
                    started_at=r["started_at"],
                    finished_at=r["finished_at"],
                    **dict(zip(("outcome", "reason"), current_outcome(r["outcome"], r["reason"]))),
                    reward=r["reward"],
                    enforcement=r["enforcement"],
                    qos_class=r["qos_class"],
                    request_cpus=r["request_cpus"],
                    request_memory_bytes=r["request_memory_bytes"],
                    limit_cpus=r["limit_cpus"],
                    limit_memory_bytes=r["limit_memory_bytes"],
                    peak_memory_bytes=r["peak_memory_bytes"],
                    cpu_time_s=r["cpu_time_s"],
                    duration_s=r["duration_s"],
                    tokens_in=r["tokens_in"],
                    tokens_out=r["tokens_out"],
                    cost_usd=r["cost_usd"],
                    evidence=evidence.get((r["trial_id"], r["try"])),
                    usage_source=r["usage_source"] if "usage_source" in r.keys() else None,
                )
            )
        trials = [
            TrialRecord(
                r["trial_id"],
                r["task_id"],
                r["config_label"],
                r["request_multiplier"],
                r["limit_multiplier"],
                r["attempt"],
                r["seed"],
                r["ord"],
                tries.get(r["trial_id"], []),
                source_run=r["source_run"] if "source_run" in r.keys() else None,
            )
            for r in self.db.execute("SELECT * FROM trials WHERE run_id=? ORDER BY ord", (run_id,))
        ]
        return run, tasks, trials

    # -- plumbing ----------------------------------------------------------------------
    def _tx(self) -> _Tx:
        return _Tx(self.db)


TRIAL_COLUMNS = "run_id, trial_id, task_id, config_label, request_multiplier, limit_multiplier, attempt, seed, ord"
EXECUTION_COLUMNS = (
    "run_id",
    "trial_id",
    "try",
    "status",
    "final",
    "started_at",
    "finished_at",
    "outcome",
    "reason",
    "reward",
    "enforcement",
    "qos_class",
    "request_cpus",
    "request_memory_bytes",
    "limit_cpus",
    "limit_memory_bytes",
    "peak_memory_bytes",
    "cpu_time_s",
    "duration_s",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "overcommit_ratio",
    "overcommit_beside_unbounded",
    "overcommit_memory_pressure",
    "usage_source",
)
OVERCOMMIT_COLUMNS = {
    "overcommit_ratio": "REAL",
    "overcommit_beside_unbounded": "INTEGER",
    "overcommit_memory_pressure": "INTEGER",
}
_SAME_TRY = "v.run_id = executions.run_id AND v.trial_id = executions.trial_id AND v.try = executions.try"
# The migration's backfill: the same three values, read once from the evidence JSON of older stores.
OVERCOMMIT_FROM_EVIDENCE = {
    column: f"SELECT json_extract(v.json, '{evidence_path('overcommit', key)}') FROM evidence v WHERE {_SAME_TRY}"
    for column, key in (
        ("overcommit_ratio", "ratio_max"),
        ("overcommit_beside_unbounded", "unbounded_in_flight"),
        ("overcommit_memory_pressure", "node_memory_pressure"),
    )
}


def overcommit_values(rec: Overcommit | None) -> tuple[float | None, int | None, int | None]:
    """The evidence's ``extra.overcommit`` record as the three executions columns."""
    if rec is None:
        return None, None, None
    pressure = rec.node_memory_pressure
    return _num(rec.ratio_max), int(rec.unbounded_in_flight), None if pressure is None else int(pressure)


def stored_overcommit(evidence: dict[str, Any] | None) -> Overcommit | None:
    """The overcommit record of a try's evidence as a bundle holds it: native facts of this or an earlier
    version (an import's own evidence has none)."""
    extra = (evidence or {}).get("extra")
    if not isinstance(extra, dict):
        return None
    try:
        return read_stored(extra).overcommit
    except ValidationError:  # not headroom's evidence, or a newer version's: kept as it is, without the columns
        return None


def _usage(ar: dict[str, Any], key: str) -> float | None:
    """A self-reported count or cost as stored: within its cap, else not reported (sums stay finite)."""
    return _capped(key, ar.get(key))


def usage_columns(facts: TrialFacts) -> tuple[float | None, float | None, float | None, str | None]:
    """tokens_in, tokens_out, cost_usd and usage_source of a try: the gateway's measurement when the try
    had one (even zero calls is a measurement), else the agent's own report, labelled as such."""
    if facts.model_usage is not None:
        u = facts.model_usage
        return (
            _capped("tokens_in", u.tokens_in),
            _capped("tokens_out", u.tokens_out),
            _capped("cost_usd", u.cost_usd),
            GATEWAY,
        )
    ar = facts.agent_result
    values = (_usage(ar, "tokens_in"), _usage(ar, "tokens_out"), _usage(ar, "cost_usd"))
    return (*values, SELF_REPORTED if any(v is not None for v in values) else None)


def _capped(key: str, v: Any) -> float | None:
    value, _ = usage_value(key, v)
    return None if value is None else float(value)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
