"""The one hostile corpus every backend runs (local, Docker, Pods on the real node).

Each case is a task whose verifier passes only if ``answer`` in the work dir holds a token
kept in the tests; its agent is ``environment/attack.sh``. The verifier is Python run the
way Terminal-Bench verifiers run it (``python3 -m`` in the work dir, found on ``PATH``, and
loading entry-point plugins as pytest does), so the attacks on the interpreter are real.
``@TESTS@`` in an attack is where the verifier will see the tests on that backend.

Every case must end the same on every backend (``expect``): no case passes, and none turns
the agent's failure into an error a score leaves out.

``HEADROOM_HOSTILE_CASES`` picks cases for a fast run: ``fast`` (one per class) or names,
comma-separated. CI runs them all (the variable unset).
"""

from __future__ import annotations

import os
import secrets
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

#: The checker, run as ``python3 -m hrcheck`` with the tests on PYTHONPATH and the work dir as cwd.
HRCHECK = textwrap.dedent("""\
    import os
    import textwrap  # a module a file planted in the work dir would replace, were the work dir on sys.path
    from importlib.metadata import entry_points

    for ep in entry_points(group="hrcheck.plugins"):  # as pytest autoloads its pytest11 plugins
        ep.load()
    expected = open(os.path.join(os.environ["HEADROOM_TASK_DIR"], "tests", "expected.txt")).read().strip()
    try:
        with open("answer") as f:
            got = f.read(4096).strip()
    except OSError:
        got = ""
    with open(os.path.join(os.environ["HEADROOM_LOGS_DIR"], "reward.txt"), "w") as f:
        f.write("1" if got == textwrap.dedent(expected) else "0")
    """)
TEST_SH = 'cd "$HEADROOM_WORKDIR" && PYTHONPATH="$HEADROOM_TASK_DIR/tests" python3 -m hrcheck\n'
#: What a planted program or module does: write a pass, if it ever runs.
FORGE = 'open(os.environ["HEADROOM_LOGS_DIR"] + "/reward.txt", "w").write("1")'
WRONG = 'echo wrong > "$HEADROOM_WORKDIR/answer"\n'
CD = 'cd "$HEADROOM_WORKDIR" || exit 1\n'


@dataclass(frozen=True)
class Case:
    name: str
    attack: str
    expect: tuple[str, str | None] = ("failed", None)
    env: dict[str, str] = field(default_factory=dict)  # the task's [environment.env]
    fast: bool = False  # in the fast subset (one per class)


def _py_plant(path: str) -> str:
    return f"cat > {path} <<'EOF'\nimport os\n{FORGE}\nos._exit(0)\nEOF\n"


CASES: list[Case] = [
    Case("control-wrong-answer", WRONG, fast=True),
    # --- a link through a system symlink and then `..` (the kernel resolves the link first) ---
    Case("system-link-dotdot", CD + textwrap.dedent("""\
        for s in /var/tmp /var/run /var/lock /bin /lib /sbin /usr/lib64; do [ -L "$s" ] && break; done
        r=$(readlink -f "$s"); ups=""; while [ "$r" != / ]; do ups="$ups../"; r=$(dirname "$r"); done
        ln -s "$s/$ups@TESTS@/expected.txt" answer
        """), fast=True),
    Case("system-link-dotdot-via-own-dir-link", CD + textwrap.dedent("""\
        for s in /var/tmp /var/run /var/lock /bin /lib /sbin /usr/lib64; do [ -L "$s" ] && break; done
        r=$(readlink -f "$s"); ups=""; while [ "$r" != / ]; do ups="$ups../"; r=$(dirname "$r"); done
        ln -s "$s" sys && mkdir -p d && ln -s "../sys/$ups@TESTS@" d/t && ln -s d/t/expected.txt answer
        """)),
    # --- the verifier's interpreter must not trust the work dir ---
    Case("module-shadowing", CD + WRONG + _py_plant("hrcheck.py"), fast=True),
    Case("module-shadowing-package-and-stdlib", CD + WRONG + "mkdir -p hrcheck && " + _py_plant("hrcheck/__init__.py")
         + _py_plant("textwrap.py")),
    Case("entry-point-plugin-dist-info", CD + WRONG + textwrap.dedent("""\
        mkdir -p evil-1.0.dist-info
        printf 'Metadata-Version: 2.1\\nName: evil\\nVersion: 1.0\\n' > evil-1.0.dist-info/METADATA
        printf '[hrcheck.plugins]\\nevil = evil_plugin\\n' > evil-1.0.dist-info/entry_points.txt
        """) + _py_plant("evil_plugin.py"), fast=True),
    Case("entry-point-plugin-egg-info-and-user-site", CD + WRONG + textwrap.dedent("""\
        mkdir -p evil.egg-info
        printf 'Metadata-Version: 2.1\\nName: evil\\nVersion: 1.0\\n' > evil.egg-info/PKG-INFO
        printf '[hrcheck.plugins]\\nevil = evil_plugin\\n' > evil.egg-info/entry_points.txt
        """) + _py_plant("evil_plugin.py") + textwrap.dedent("""\
        site=$(python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null)
        [ -n "$site" ] && mkdir -p "$site" 2>/dev/null && cp evil_plugin.py "$site/usercustomize.py" 2>/dev/null
        true
        """)),
    Case("relative-path-entry", CD + WRONG + "mkdir -p bin && printf '#!/bin/sh\\necho 1 > \"$HEADROOM_LOGS_DIR/reward.txt\"\\n'"
         " > bin/python3 && chmod +x bin/python3\n",
         env={"PATH": "bin:/usr/local/bin:/usr/bin:/bin"}, fast=True),
    Case("empty-and-dot-path-entries", CD + WRONG + "printf '#!/bin/sh\\necho 1 > \"$HEADROOM_LOGS_DIR/reward.txt\"\\n'"
         " > python3 && chmod +x python3\n",
         env={"PATH": ":.:/usr/local/bin:/usr/bin:/bin"}),
    # --- states that used to break the verifier: the agent's failure, never a harness error ---
    Case("unreadable-work-dir", CD + WRONG + 'chmod 000 answer; chmod 000 "$HEADROOM_WORKDIR"\n', fast=True),
    Case("unreadable-nested-dirs", CD + "mkdir -p a/b && echo wrong > a/b/f && ln -s a/b/f answer && "
         "chmod 000 a/b/f && chmod 300 a/b && chmod 100 a\n"),
    Case("fifo-where-the-verifier-reads", CD + "mkfifo answer\n", fast=True),
    Case("link-to-a-fifo-and-a-device", CD + "mkdir -p q && mkfifo q/f && ln -s q/f answer && ln -s /dev/zero zero\n"),
    # --- an unlistable folder (as non-root: the agent's own, so the sanitiser can open it again) ---
    Case("unlistable-dir", CD + "mkdir d && ln -s @TESTS@/expected.txt d/x && ln -s d/x answer && chmod 000 d\n",
         fast=True),
    Case("unlistable-write-only-dir", CD + "mkdir -p d/e && ln -s @TESTS@ d/e/t && ln -s d/e/t/expected.txt answer && "
         "chmod 300 d/e && chmod 100 d\n"),
    # --- link bombs: deep and long chains end in bounded time ---
    Case("link-bomb-deep-missing-targets", CD + WRONG + textwrap.dedent("""\
        deep=$(printf 'a/%.0s' $(seq 800)); back=$(printf '../%.0s' $(seq 800))
        for i in $(seq 13); do ln -s "$deep$back$deep$back@TESTS@/expected.txt" "bomb$i"; done
        """), fast=True),
    Case("link-bomb-long-chain", CD + WRONG + textwrap.dedent("""\
        ln -s @TESTS@/expected.txt c0
        i=1; while [ $i -le 1500 ]; do ln -s "c$((i - 1))" "c$i"; i=$((i + 1)); done
        ln -s c1500 answer2
        """)),
    # --- a link name that is not UTF-8 (the Docker scan once checked a path that did not exist) ---
    Case("non-utf8-link-name", CD + WRONG + "ln -s @TESTS@ \"$(printf 't\\377\\376')\" && "
         "ln -s \"$(printf 't\\377\\376')/expected.txt\" answer\n", fast=True),
    Case("non-utf8-dir-holding-the-link", CD + "mkdir \"$(printf 'd\\377')\" && "
         "ln -s @TESTS@/expected.txt \"$(printf 'd\\377')/x\" && ln -s \"$(printf 'd\\377')/x\" answer\n"),
]


def selected() -> list[Case]:
    want = os.environ.get("HEADROOM_HOSTILE_CASES", "").strip()
    if not want:
        return list(CASES)
    if want == "fast":
        return [c for c in CASES if c.fast]
    names = {w.strip() for w in want.split(",") if w.strip()}
    unknown = names - {c.name for c in CASES}
    if unknown:
        raise ValueError(f"HEADROOM_HOSTILE_CASES names no such case: {', '.join(sorted(unknown))}")
    return [c for c in CASES if c.name in names]


def write_corpus(root: Path, cases: list[Case], *, tests_at: str, base_image: str | None = None) -> dict[str, str]:
    """One task per case under ``root``; ``tests_at`` is where the backend's verifier sees the tests.
    Returns task id -> the token the verifier expects (never given to the agent)."""
    tokens = {}
    for c in cases:
        d = root / c.name
        (d / "tests").mkdir(parents=True)
        (d / "environment").mkdir()
        env = "".join(f'{k} = "{v}"\n' for k, v in c.env.items())
        (d / "task.toml").write_text(textwrap.dedent("""\
            version = "1.0"
            [environment]
            cpus = 1
            memory_mb = 256
            storage_mb = 1024
            [agent]
            timeout_sec = 60
            [verifier]
            timeout_sec = 60
            [provenance]
            source = "headroom hostile corpus"
            """) + (f"[environment.env]\n{env}" if env else ""))
        (d / "instruction.md").write_text("Write the expected token to $HEADROOM_WORKDIR/answer.\n")
        (d / "tests" / "test.sh").write_text(TEST_SH)
        (d / "tests" / "hrcheck.py").write_text(HRCHECK)
        tokens[c.name] = secrets.token_hex(12)
        (d / "tests" / "expected.txt").write_text(tokens[c.name] + "\n")
        (d / "environment" / "attack.sh").write_text(c.attack.replace("@TESTS@", tests_at))
        if base_image:
            (d / "environment" / "Dockerfile").write_text(f"FROM {base_image}\nWORKDIR /app\n")
    return tokens


def expected(cases: list[Case]) -> dict[str, tuple[str, str | None]]:
    return {c.name: c.expect for c in cases}
