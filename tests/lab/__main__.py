"""python -m tests.lab galera|gr|proxysql|docker COMMAND ... : drive the lab by hand."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    usage = "usage: python -m tests.lab galera|gr|proxysql|docker COMMAND [ARGS]"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    kind, rest = argv[0], argv[1:]
    if kind == "galera":
        from tests.lab import galera

        return galera.main(rest)
    if kind == "gr":
        from tests.lab import gr

        return gr.main(rest)
    if kind == "proxysql":
        from tests.lab import proxysql

        return proxysql.main(rest)
    if kind == "docker":
        from tests.lab import docker_engine

        return docker_engine.main(rest)
    print(f"unknown lab {kind!r}; {usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
