"""`-o` means one thing on every command: write this FILE instead of stdout (a directory is `--out-dir`).

tests/cli/test_conventions.py checks the declarations; here, what the commands do with them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Headroom, one_line_error

HARBOR_TASKS = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "harbor_tasks"


def test_a_directory_is_out_dir_and_the_old_dash_o_still_works_once_more(headroom: Headroom, tmp_path: Path) -> None:
    new = headroom("tasks", "import", str(HARBOR_TASKS), "--out-dir", str(tmp_path / "a"))
    assert new.returncode in (0, 1), new.stderr  # 1: the fixture holds tasks that are listed and skipped
    assert "deprecated" not in new.stderr and (tmp_path / "a" / "import-summary.json").is_file()
    old = headroom("tasks", "import", str(HARBOR_TASKS), "-o", str(tmp_path / "b"))
    assert old.returncode == new.returncode, old.stderr
    assert old.lines[0] == (
        "warning: headroom tasks import -o/--output DIR is deprecated and will be removed in the "
        "next release; use --out-dir DIR"
    )
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(p.name for p in (tmp_path / "a").iterdir())


def test_the_directory_is_required_and_named_once(headroom: Headroom, tmp_path: Path) -> None:
    one_line_error(headroom("tasks", "import", str(HARBOR_TASKS)), "needs --out-dir DIR")
    one_line_error(
        headroom("tasks", "import", str(HARBOR_TASKS), "--out-dir", str(tmp_path / "a"), "-o", str(tmp_path / "b")),
        "give --out-dir once (--output/-o is its old name)",
    )


def test_bundle_dash_o_is_a_file_and_a_digest_named_file_goes_to_out_dir(
    swept: Path, headroom: Headroom, tmp_path: Path
) -> None:
    one_file = tmp_path / "entry.json"
    res = headroom("runs", "bundle", str(swept), "-o", str(one_file))
    assert res.returncode == 0, res.stderr
    digest = json.loads(one_file.read_text())["content_sha256"]
    assert "headroom runs verify" in res.stderr
    folder = tmp_path / "bundles"
    res = headroom("runs", "bundle", str(swept), "--out-dir", str(folder))
    assert res.returncode == 0, res.stderr
    (named,) = folder.iterdir()
    assert digest[:12] in named.name and named.read_bytes() == one_file.read_bytes()
    old = headroom("runs", "bundle", str(swept), "-o", str(folder))  # the old -o DIR, once more
    assert old.returncode == 0 and old.lines[0].startswith("warning: headroom runs bundle -o DIR is deprecated")
    assert "use --out-dir DIR" in old.lines[0] and [p.name for p in folder.iterdir()] == [named.name]
    one_line_error(headroom("runs", "bundle", str(swept)), "give -o FILE, or --out-dir DIR")
    one_line_error(headroom("runs", "bundle", str(swept), "-o", str(one_file), "--out-dir", str(folder)), "not both")
