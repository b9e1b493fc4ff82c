"""``$HEADROOM_EXEC [-i] [--cwd DIR] [--env K=V]... [--timeout S] [--user U] -- COMMAND...``

Runs COMMAND in the trial's environment through the try's exec channel, passes its
stdout and stderr through, and exits with its status: the command's exit code,
124 when it timed out, 128+N when signal N killed it, 125 when the channel itself
failed (with one line on stderr). Stdin is passed only with ``-i`` (as ``docker
exec -i``): otherwise the command reads an empty stdin, so an agent that runs this
with an open stdin never hangs.
"""

from __future__ import annotations

import argparse
import sys

try:
    from orchestrator.agents import exec as hx
except ImportError:  # the standalone copy in a host agent's sandbox, beside headroom_exec.py
    import headroom_exec as hx  # type: ignore[import-not-found,no-redef]

CHANNEL_FAILED = 125


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headroom-exec", description="run a command in the trial's environment")
    p.add_argument("-i", "--interactive", action="store_true", help="pass this process's stdin to the command")
    p.add_argument("--cwd", help="working directory inside the environment (default: its work dir)")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="a variable for the command; repeatable")
    p.add_argument("--timeout", type=float, help="seconds before the command is killed")
    p.add_argument("--user", help="user to run as, where the environment has users (container backends)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("headroom-exec: no command (usage: $HEADROOM_EXEC -- COMMAND ...)", file=sys.stderr)
        return 2
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"headroom-exec: --env takes K=V, got {item!r}", file=sys.stderr)
            return 2
        env[key] = value
    stdin = sys.stdin.buffer.read() if args.interactive else None
    try:
        r = hx.run(command, cwd=args.cwd, env=env, stdin=stdin, timeout=args.timeout, user=args.user)
    except hx.ExecChannelError as exc:
        print(f"headroom-exec: {exc}", file=sys.stderr)
        return CHANNEL_FAILED
    sys.stdout.buffer.write(r.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(r.stderr)
    sys.stderr.flush()
    return r.returncode


def main_exit() -> None:
    """The ``headroom-exec`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
