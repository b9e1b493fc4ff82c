"""`-o` means one thing on every command: write this FILE instead of stdout (a directory is `--out-dir`).

tests/cli/test_conventions.py checks the declarations; here, what the commands do with them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Headroom, one_line_error

HARBOR_TASKS = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "harbor_tasks"


def test_a_directory_is_out_dir_and_dash_o_is_no_directory(headroom: Headroom, tmp_path: Path) -> None:
    new = headroom("tasks", "import", str(HARBOR_TASKS), "--out-dir", str(tmp_path / "a"))
    assert new.returncode in (0, 1), new.stderr  # 1: the fixture holds tasks that are listed and skipped
    assert (tmp_path / "a" / "import-summary.json").is_file()
    one_line_error(headroom("tasks", "import", str(HARBOR_TASKS), "-o", str(tmp_path / "b")), "No such option", "-o")
    assert not (tmp_path / "b").exists()


def test_the_directory_is_required_and_named_once(headroom: Headroom, tmp_path: Path) -> None:
    one_line_error(headroom("tasks", "import", str(HARBOR_TASKS)), "needs --out-dir DIR")


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
    one_line_error(headroom("runs", "bundle", str(swept), "-o", str(folder)), "is a directory; give --out-dir DIR")
    assert [p.name for p in folder.iterdir()] == [named.name]
    one_line_error(headroom("runs", "bundle", str(swept)), "give -o FILE, or --out-dir DIR")
    one_line_error(headroom("runs", "bundle", str(swept), "-o", str(one_file), "--out-dir", str(folder)), "not both")
