"""A cluster's hook keys: each bad value refused under its own key (the URL never shown), a
good set read as HookSettings, no hook when none is configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker_core.core.schema import Checker
from checker_core.core.settings import Secret, Settings
from checker_core.settings.config import ConfigError, load
from tests.unit.config_cases import CONFIG, config_file

TOKEN = "T0KEN-never-shown"


def with_hooks(tmp_path: Path, lines: str, overrides: tuple[str, ...] = ()) -> Settings:
    path = config_file(tmp_path, CONFIG + lines)
    return load(path, Checker.GALERA, env={}, overrides=overrides)


def problems(tmp_path: Path, lines: str, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        with_hooks(tmp_path, lines, overrides)
    return [str(p) for p in refused.value.problems]


def executable(tmp_path: Path, name: str = "hook.sh", mode: int = 0o755) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\ncat >/dev/null\n")
    path.chmod(mode)
    return path


def test_no_hook_configured_is_none(tmp_path: Path) -> None:
    settings = with_hooks(tmp_path, "")
    assert settings.clusters[0].hooks is None


def test_a_good_set_is_read(tmp_path: Path) -> None:
    program = executable(tmp_path)
    settings = with_hooks(
        tmp_path,
        f"hook_command = \"{program} --zone 'db east'\"\n"
        f'hook_url = "https://chat.example.test/hooks/{TOKEN}"\n'
        'hook_timeout_ms = 2500\nhook_queue = 7\nhook_events = "writer_changed, blind"\n',
    )
    hooks = settings.clusters[0].hooks
    assert hooks is not None
    assert hooks.command == (str(program), "--zone", "db east")
    assert hooks.url == Secret(f"https://chat.example.test/hooks/{TOKEN}")
    assert TOKEN not in repr(hooks)
    assert (hooks.timeout_ms, hooks.queue) == (2500, 7)
    assert hooks.events == {"writer_changed", "blind"}
    assert hooks.wants("blind") and not hooks.wants("node_out")


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (
            'hook_command = "hook.sh"\n',
            "cluster[0].hook_command: must begin with the program's absolute path",
        ),
        (
            'hook_command = "/nonexistent/hook"\n',
            "cluster[0].hook_command: /nonexistent/hook is not a file",
        ),
        (
            'hook_command = "/bin/true \'open"\n',
            "cluster[0].hook_command: cannot be split into words",
        ),
        (
            f'hook_url = "ftp://files.example.test/{TOKEN}"\n',
            "cluster[0].hook_url: must be an http:// or https:// URL",
        ),
        (f'hook_url = "https://{TOKEN}:99999/x"\n', "cluster[0].hook_url: is not a URL"),
        (
            'hook_command = "/bin/true"\nhook_events = "writer_moved"\n',
            "cluster[0].hook_events: unknown event(s) 'writer_moved'",
        ),
        (
            'hook_events = "blind"\n',
            "cluster[0].hook_events: names events, but no hook_command or hook_url",
        ),
        (
            'hook_command = "/bin/true"\nhook_timeout_ms = 10\n',
            "cluster[0].hook_timeout_ms: must be >= 100",
        ),
        ('hook_command = "/bin/true"\nhook_queue = 0\n', "cluster[0].hook_queue: must be >= 1"),
    ],
)
def test_each_bad_value_is_said_under_its_key(tmp_path: Path, lines: str, says: str) -> None:
    found = problems(tmp_path, lines)
    assert len(found) == 1, found
    assert found[0].startswith(says), found
    assert TOKEN not in found[0]


def test_a_program_this_user_cannot_run_is_refused(tmp_path: Path) -> None:
    program = executable(tmp_path, mode=0o644)
    found = problems(tmp_path, f'hook_command = "{program}"\n')
    assert found == [f"cluster[0].hook_command: {program} is not executable by this user"]


def test_the_url_is_refused_on_the_command_line(tmp_path: Path) -> None:
    """--set is in every user's `ps`: a URL that may hold a token is refused there."""
    found = problems(tmp_path, "", (f"cluster.0.hook_url=https://x.example.test/{TOKEN}",))
    assert len(found) == 1 and "hook_url" in found[0] and TOKEN not in found[0]
