"""What the sweep verbs (and ``runs cleanup``, ``cluster submit``, ``tasks validate``) share in reading an
experiment from the command line: --multipliers, an experiment file, the flags' checks, and the experiment
the flags say over a base, with a backend-specific flag the backend would ignore refused."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from orchestrator import backends
from orchestrator.errors import UserError
from orchestrator.spec.unknown import first_validation_error

if TYPE_CHECKING:
    from orchestrator.spec.experiment import Experiment, ExperimentOverrides
    from orchestrator.spec.resources import ResourceConfig


def parse_multipliers(text: str) -> list[ResourceConfig]:
    """The configurations --multipliers names; a spelling that reads two ways is refused (see ambiguous)."""
    from pydantic import ValidationError

    from orchestrator.errors import LabelError
    from orchestrator.spec.resources import ResourceConfig

    parts = [part.strip() for part in text.split(",") if part.strip()]
    for part in parts:
        if (problem := ambiguous(part)) is not None:
            raise UserError(problem, field="--multipliers")
    try:
        return [ResourceConfig.parse(part) for part in parts]
    except LabelError as exc:
        raise UserError(str(exc), field="--multipliers") from None
    except ValidationError as exc:
        raise UserError(first_validation_error(exc)[1], field="--multipliers") from None


def ambiguous(label: str) -> str | None:
    """Why ``Nx`` alone (N other than 1) cannot be read: it says a multiple, not of what.

    The label grammar reads it as request 1x, limit Nx (as a bare ``N`` is), but ``4x`` reads just as
    well as both at 4x; on the command line, where it was measured being misread, it is refused.
    """
    text = str(label).strip().lower()
    if not re.fullmatch(r"\d+(?:\.\d+)?x", text):
        return None
    n = float(text[:-1])
    if n == 1:
        return None  # 1x/1x either way
    m = f"{n:g}x"
    return f"{label!r} reads two ways: write 1x/{m} for a {m} limit over the spec's request, or {m}/{m} for both at {m}"


def file_notes(configurations: Any) -> list[str]:
    """An experiment file's ``Nx``: still read as 1x/Nx (files and cluster Experiments are written so), said aloud."""
    if not isinstance(configurations, list):
        return []
    return [
        f"configurations: {str(c)!r} is read as 1x/{str(c).strip().lower()} (request 1x); write "
        f"{str(c).strip().lower()}/{str(c).strip().lower()} for both at that multiple"
        for c in configurations
        if isinstance(c, str) and ambiguous(c) is not None
    ]


def load_experiment_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except IsADirectoryError:
        raise UserError("is a directory; give the experiment's YAML file", file=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except yaml.YAMLError as exc:
        raise UserError(f"malformed YAML ({yaml_problem(exc)})", file=str(path)) from None
    if not isinstance(data, dict):
        raise UserError("expected a mapping of experiment fields", file=str(path))
    return data


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What the parser found and where (1-based line and column), on one line."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark is not None else what


def check_env_names(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    from orchestrator.spec.experiment import ENV_NAME, env_name_problem

    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise UserError(env_name_problem(name), field="--agent-env")
    return names


def nonempty(value: str | None, flag: str, problem: str = "is empty; give a value or leave the flag out") -> str | None:
    if value is not None and not value.strip():
        raise UserError(problem, field=flag)
    return value


def finite(value: float, flag: str) -> float:
    if math.isnan(value):  # click's range check lets NaN through (every comparison with it is false)
        raise UserError("not a number; give a multiple such as 1.5", field=flag)
    return value


def build_experiment(overrides: ExperimentOverrides, base: dict[str, Any], source: str | None) -> Experiment:
    """The experiment the flags say over ``base`` (an experiment file's mapping, or a command's own); a
    backend-specific flag the experiment's backend would ignore is refused."""
    experiment = overrides.apply(base, source)
    refuse_ignored_flags(experiment.backend, overrides.flags())
    return experiment


def refuse_ignored_flags(backend_name: str, flags: list[str]) -> None:
    """A backend-specific flag the run's backend does not declare is refused before anything runs."""
    from orchestrator.backends.abilities import BACKEND_FLAGS, refuse_flags

    if specific := [f for f in flags if f in BACKEND_FLAGS]:
        refuse_flags(backend_name, backends.declared_abilities(backend_name), specific)
