"""Config loading: precedence, defaults, and one message per problem naming its key."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import click
import pytest
from click.testing import CliRunner

from checker_core.core.keys import KEYS
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker
from checker_core.core.settings import Secret
from checker_core.edges.pending import PendingProbes
from checker_core.settings.config import ConfigError, load
from galera_checker.cli import build as build_galera
from gr_checker.cli import build as build_gr
from tests.unit.config_cases import CONFIG, config_file
from tests.unit.fakes import HealthyProber, ports

# the shared config, its admin password read from a file
GOOD = CONFIG.replace('password = "admin-pw"', 'password_file = "{secret}"', 1)

WriteConfig = Callable[[str], Path]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    secret = tmp_path / "admin.pw"
    secret.write_text("s3cret\n")

    def write(text: str) -> Path:
        return config_file(tmp_path, text.replace("{secret}", str(secret)))

    return write


def problems_of(path: Path, checker: Checker = Checker.GALERA, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(path, checker, **{"env": {}, **kwargs})  # type: ignore[arg-type]
    return [str(p) for p in info.value.problems]


def test_good_file_fills_defaults(write_config: WriteConfig) -> None:
    settings = load(write_config(GOOD), Checker.GALERA, env={})
    cluster = settings.clusters[0]
    assert cluster.hostgroups.config_writer == 8100
    assert cluster.hostgroups.config_reader == 8101
    assert (cluster.max_writers, cluster.writer_is_also_reader, cluster.retry_down) == (1, 1, 0)
    assert settings.proxysql.endpoint.password.reveal() == "s3cret"
    assert settings.run.persist is True
    assert settings.warnings == ()


def test_secrets_never_print(write_config: WriteConfig) -> None:
    settings = load(write_config(GOOD), Checker.GALERA, env={})
    text = repr(settings) + str(settings)
    assert "s3cret" not in text
    assert "monitor-pw" not in text
    assert repr(Secret("x")) == "Secret('***')"


def test_precedence_file_env_cli(write_config: WriteConfig) -> None:
    path = write_config(GOOD.replace("[run]\n", '[run]\nlog_level = "warning"\n'))
    assert load(path, Checker.GALERA, env={}).run.log_level == "warning"
    env = {"CHECKER_RUN_LOG_LEVEL": "error", "CHECKER_CLUSTER_0_RETRY_DOWN": "3"}
    from_env = load(path, Checker.GALERA, env=env)
    assert from_env.run.log_level == "error"
    assert from_env.clusters[0].retry_down == 3
    from_cli = load(
        path, Checker.GALERA, env=env, overrides=["run.log_level=debug", "cluster[0].retry_down=5"]
    )
    assert from_cli.run.log_level == "debug"
    assert from_cli.clusters[0].retry_down == 5


def test_env_password_overrides_file(write_config: WriteConfig) -> None:
    text = GOOD.replace('password = "monitor-pw"\n', "")
    settings = load(
        write_config(text), Checker.GALERA, env={"CHECKER_MONITOR_PASSWORD": "from-env"}
    )
    assert settings.monitor.password.reveal() == "from-env"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("port = 6032", "port = 70000"), "proxysql.port: must be <= 65535, got 70000"),
        (("port = 6032", 'port = "x"'), "proxysql.port: expected a whole number, got 'x'"),
        (
            ("reader_hostgroup = 101", "reader_hostgroup = 100"),
            "cluster[0].reader_hostgroup: 100 is the same as writer_hostgroup",
        ),
        (
            ("reader_hostgroup = 101", "reader_hostgroup = 0"),
            "cluster[0].reader_hostgroup: must be >= 1, got 0",
        ),
        (
            ('name = "main"', 'name = "a b"'),
            "cluster[0].name: 'a b': use 1-64 of A-Z a-z 0-9 _ . -",
        ),
        (('name = "main"\n', ""), "cluster[0].name: missing (required)"),
        (
            ('name = "main"', 'name = "main\\nx"'),
            "cluster[0].name: 'main\\nx': use 1-64 of A-Z a-z 0-9 _ . -",
        ),
        (
            ('host = "127.0.0.1"', 'host = "127.0.0.1; DROP TABLE x"'),
            "proxysql.host: '127.0.0.1; DROP TABLE x' is not a host name or an IP address",
        ),
        (
            ('host = "127.0.0.1"', 'host = "/tmp/proxysql_admin.sock"'),
            "proxysql.host: '/tmp/proxysql_admin.sock' is not a host name or an IP address",
        ),
        (
            ("port = 6032", 'port = 6032\ncluster_address = "proxysql-0"'),
            "proxysql.cluster_address: 'proxysql-0': expected host:port, as proxysql_servers "
            "names this proxy",
        ),
        (
            ("port = 6032", 'port = 6032\ncluster_address = "proxy sql:6032"'),
            "proxysql.cluster_address: 'proxy sql' is not a host name or an IP address",
        ),
        (
            ("port = 6032", 'port = 6032\ncluster = "on"'),
            "proxysql.cluster: must be one of auto, off, got 'on'",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\nretry_donw = 2"),
            "cluster[0].retry_donw: unknown key (did you mean retry_down?)",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\nwriter_is_also_reader = 3"),
            "cluster[0].writer_is_also_reader: must be <= 2, got 3",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\nfail_back = 1"),
            "cluster[0].fail_back: expected true or false, got 1",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\nconfig_writer_hostgroup = 101"),
            "cluster[0].config_writer_hostgroup: 101 is the same as reader_hostgroup",
        ),
        (
            ("[run]\n", "[run]\nmax_runtime_ms = 5000\n"),
            "run.max_runtime_ms: 5000 must be below run.interval_ms (2000) so passes never overlap",
        ),
        (
            ("[run]\n", '[run]\nlog_format = "xml"\n'),
            "run.log_format: must be one of auto, json, console, got 'xml'",
        ),
        (
            (
                'password = "monitor-pw"\n',
                'password = "monitor-pw"\npassword_file = "/etc/hostname"\n',
            ),
            "monitor.password: set password or password_file, not both",
        ),
        (
            ('password = "monitor-pw"\n', ""),
            "monitor.password: missing (set password or password_file)",
        ),
        (
            ('state_dir = "{state}"', 'state_dir = "relative/dir"'),
            "run.state_dir: 'relative/dir' must be an absolute path "
            "(the scheduler runs with no working directory of ours)",
        ),
        (
            ("offline_hostgroup = 9100", 'offline_hostgroup = 9100\nbrownout = "hold"'),
            "cluster[0].brownout: only gr-checker uses this key",
        ),
        (
            ("[run]\n", '[run]\nmetrics_listen = "9140"\n'),
            "run.metrics_listen: '9140' is not HOST:PORT (e.g. 127.0.0.1:9140)",
        ),
        (
            ("[run]\n", '[run]\nmetrics_listen = "127.0.0.1:99999"\n'),
            "run.metrics_listen: '127.0.0.1:99999': port 99999 is not between 1 and 65535",
        ),
        (
            ("[run]\n", '[run]\nmetrics_listen = "::1:9140"\n'),
            "run.metrics_listen: '::1:9140': write an IPv6 address in brackets, e.g. [::1]:9140",
        ),
        (
            ("[run]\n", '[run]\nlog_stream = "file"\n'),
            "run.log_stream: must be one of stderr, stdout, got 'file'",
        ),
    ],
)
def test_each_mistake_names_its_key(
    write_config: WriteConfig, edit: tuple[str, str], expected: str
) -> None:
    old, new = edit
    assert old in GOOD
    assert problems_of(write_config(GOOD.replace(old, new, 1))) == [expected]


@pytest.mark.parametrize(
    ("text", "host", "port", "url"),
    [
        ("127.0.0.1:9140", "127.0.0.1", 9140, "http://127.0.0.1:9140/health"),
        ("0.0.0.0:9140", "0.0.0.0", 9140, "http://127.0.0.1:9140/health"),  # noqa: S104 (parsed, not bound)
        ("[::]:1", "::", 1, "http://[::1]:1/health"),
        ("[::1]:9140", "::1", 9140, "http://[::1]:9140/health"),
        ("checker.local:80", "checker.local", 80, "http://checker.local:80/health"),
    ],
)
def test_metrics_listen_addresses(
    write_config: WriteConfig, text: str, host: str, port: int, url: str
) -> None:
    path = write_config(GOOD.replace("[run]\n", f'[run]\nmetrics_listen = "{text}"\n'))
    listen = load(path, Checker.GALERA, env={}).run.metrics_listen
    assert listen is not None
    assert (listen.host, listen.port, listen.url("/health")) == (host, port, url)


def test_gr_rejects_galera_only_keys(write_config: WriteConfig) -> None:
    text = GOOD.replace("offline_hostgroup = 9100", "offline_hostgroup = 9100\nmain_segment = 1")
    assert problems_of(write_config(text), Checker.GR) == [
        "cluster[0].main_segment: only galera-checker uses this key"
    ]
    assert load(write_config(text), Checker.GALERA, env={}).clusters[0].main_segment == 1


def test_password_file_errors(write_config: WriteConfig, tmp_path: Path) -> None:
    missing = GOOD.replace("{secret}", str(tmp_path / "nope"))
    assert problems_of(write_config(missing)) == [
        f"proxysql.password_file: cannot read {tmp_path / 'nope'}: No such file or directory"
    ]


def second_cluster(name: str, reader: int) -> str:
    return (
        f'\n[[cluster]]\nname = "{name}"\nwriter_hostgroup = 200\nreader_hostgroup = {reader}\n'
        "backup_writer_hostgroup = 202\noffline_hostgroup = 9200\n"
    )


def test_hostgroups_shared_between_clusters(write_config: WriteConfig) -> None:
    second = second_cluster("other", 101)
    problems = problems_of(write_config(GOOD + second))
    assert problems == ["cluster[1].reader_hostgroup: 101 is already cluster[0].reader_hostgroup"]


def test_duplicate_cluster_names(write_config: WriteConfig) -> None:
    second = second_cluster("main", 201)
    assert problems_of(write_config(GOOD + second)) == [
        "cluster[1].name: 'main' is already cluster[0].name"
    ]


def test_bad_env_and_cli_overrides(write_config: WriteConfig) -> None:
    path = write_config(GOOD)
    problems = problems_of(
        path, env={"CHECKER_RUN_LOG_LEVL": "debug"}, overrides=["cluster[3].retry_up=1", "nokey"]
    )
    assert problems == [
        "--set: 'nokey': expected KEY=VALUE",
        "CHECKER_RUN_LOG_LEVL: unknown key run.log_levl (did you mean log_level?)",
        "--set cluster[3].retry_up: there is no cluster[3] in the file",
    ]


def test_unknown_section_suggests(write_config: WriteConfig) -> None:
    problems = problems_of(write_config(GOOD.replace("[monitor]", "[monitr]")))
    assert problems == [
        "monitr: unknown section (did you mean monitor?)",
        "monitor.password: missing (set password or password_file)",
    ]


def test_missing_cluster_and_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[proxysql]\npassword = "x"\n[monitor]\npassword = "y"\n')
    assert problems_of(path) == ["cluster: no [[cluster]] table: at least one cluster is required"]
    path.write_text("[proxysql\n")
    (problem,) = problems_of(path)
    assert problem.startswith(f"config: {path} is not valid TOML")
    assert problems_of(tmp_path / "absent.toml") == [
        f"config: cannot read {tmp_path / 'absent.toml'}: No such file or directory"
    ]


def test_world_readable_password_warns(write_config: WriteConfig) -> None:
    path = write_config(GOOD)
    path.chmod(0o644)
    assert load(path, Checker.GALERA, env={}).warnings == (
        f"{path} holds a password and is readable by others: chmod 600 {path}",
    )


def test_every_key_is_documented() -> None:
    for key in KEYS:
        assert key.doc.strip(), f"{key.section}.{key.name} has no doc"


FIVE_MISTAKES = """
[proxysql]
port = 0
password = "x"
[monitor]
password = "y"
[run]
log_levl = "info"
[[cluster]]
name = "main"
writer_hostgroup = 100
reader_hostgroup = 100
backup_writer_hostgroup = 102
offline_hostgroup = 9100
max_writers = 0
retry_up = -1
"""


@pytest.mark.parametrize("builder", [build_galera, build_gr])
def test_check_config_command_lists_all_five(
    tmp_path: Path, builder: Callable[[], click.Group]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(FIVE_MISTAKES)
    env: dict[str, str | None] = {"CHECKER_CONFIG": None}
    result = CliRunner().invoke(builder(), ["check-config", "--config", str(path)], env=env)
    assert result.exit_code == 2
    for key in (
        "proxysql.port",
        "run.log_levl",
        "cluster[0].reader_hostgroup",
        "cluster[0].max_writers",
        "cluster[0].retry_up",
    ):
        assert f"  {key}: " in result.output
    assert "5 problem(s)" in result.output


def test_check_config_good_file_exit_0(write_config: WriteConfig) -> None:
    path = write_config(GOOD)
    result = CliRunner().invoke(build_galera(), ["--config", str(path), "check-config"])
    assert result.exit_code == 0, result.output
    assert "cluster main: writer 100, reader 101" in result.output
    assert "s3cret" not in result.output


def test_check_config_without_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHECKER_CONFIG", raising=False)
    result = CliRunner().invoke(build_galera(), ["check-config"])
    assert result.exit_code == 2
    assert "no configuration file" in result.output


def test_config_from_environment_variable(write_config: WriteConfig) -> None:
    path = write_config(GOOD)
    result = CliRunner().invoke(
        build_gr(), ["check-config"], env={**os.environ, "CHECKER_CONFIG": str(path)}
    )
    assert result.exit_code == 0, result.output


def test_unusable_state_dir_is_bad_input_before_any_connection(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    import dataclasses

    from checker_core.exitcodes import Exit
    from checker_core.passes.result import Mode, Outcome
    from checker_core.passes.runner import PassRunner
    from galera_checker.cli import kind

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # port 1: a pass that got as far as connecting would fail, not report bad input
    settings = load(write_config(GOOD.replace("port = 6032", "port = 1")), Checker.GALERA, env={})
    # the file became a blocker after the configuration was loaded (load refuses it up front)
    run = dataclasses.replace(settings.run, state_dir=blocker / "state")
    settings = dataclasses.replace(settings, run=run)
    runner = PassRunner(settings, kind())
    try:
        result = runner.run(Mode.APPLY)
    finally:
        runner.close()
    assert result.outcome is Outcome.BAD_INPUT
    assert result.outcome.exit_code is Exit.BAD_INPUT
    assert f"run.state_dir {blocker / 'state'}: cannot create or write" in result.message


class SlowAdmin:
    """An admin interface whose read takes `seconds` of the pass's (fake) clock."""

    def __init__(self, clock: list[float], seconds: float) -> None:
        self.clock, self.seconds = clock, seconds
        self.applied = False

    def read_rows(self, hostgroups: object) -> object:
        from tests.unit.galera_cases import rows_of

        self.clock[0] += self.seconds
        return rows_of([])

    def apply(self, *args: object) -> object:
        self.applied = True
        raise AssertionError("a pass without time to probe must not apply anything")

    round_trip_s = 0.0

    def fresh_round_trip_s(self) -> float:
        return self.round_trip_s

    def bound_by(self, deadline: object) -> None:
        pass  # instant: no deadline to keep

    def close(self) -> None:
        pass


class UnaskedProber(HealthyProber):
    """A prober no pass may ask: it fails the test if it is."""

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pytest.fail("probed")


def test_pass_with_no_time_left_to_probe_changes_nothing(write_config: WriteConfig) -> None:
    from checker_core.edges.proxysql import AdminClient
    from checker_core.passes.result import Mode, Outcome
    from checker_core.passes.runner import PassRunner
    from galera_checker.cli import kind

    text = GOOD.replace("[run]\n", "[run]\nmax_runtime_ms = 1000\n")
    settings = load(write_config(text), Checker.GALERA, env={})
    clock = [100.0]
    # reading ProxySQL eats 0.5 s of the 1 s pass: 0.1 s of the 0.6 s probe share is left
    admin = SlowAdmin(clock, 0.5)
    runner = PassRunner(
        settings,
        kind(),
        **ports(cast(AdminClient, admin), UnaskedProber(), monotonic=lambda: clock[0]),
    )
    try:
        result = runner.run(Mode.APPLY)
    finally:
        runner.close()
    assert result.outcome is Outcome.FAILED
    assert result.message == (
        "reading ProxySQL took 500 ms of run.max_runtime_ms (1000), leaving 100 ms to probe; "
        "nothing changed"
    )
    assert not admin.applied


def test_eviction_needs_the_node_admin_account(write_config: WriteConfig) -> None:
    evicting = GOOD + "evict_dead_nodes = true\n"
    assert problems_of(write_config(evicting)) == [
        "cluster[0].evict_dead_nodes: needs the [node_admin] account (SET GLOBAL "
        "wsrep_provider_options on a survivor); see docs/eviction.md"
    ]
    with_account = evicting.replace(
        "[run]", '[node_admin]\nuser = "nodeadmin"\npassword_file = "{secret}"\n[run]'
    )
    settings = load(write_config(with_account), Checker.GALERA, env={})
    assert settings.clusters[0].evict_dead_nodes
    assert settings.node_admin is not None and settings.node_admin.user == "nodeadmin"
    assert settings.run.watch_interval_ms == 40


def test_unresponsive_eviction_is_off_by_default_and_needs_the_node_admin_account(
    write_config: WriteConfig,
) -> None:
    assert load(write_config(GOOD), Checker.GALERA, env={}).clusters[0].unresponsive_after_ms == 0
    evicting = GOOD + "evict_unresponsive_nodes = true\nunresponsive_after_ms = 1500\n"
    assert problems_of(write_config(evicting)) == [
        "cluster[0].evict_unresponsive_nodes: needs the [node_admin] account (SET GLOBAL "
        "wsrep_provider_options on a survivor); see docs/eviction.md"
    ]
    with_account = evicting.replace(
        "[run]", '[node_admin]\nuser = "nodeadmin"\npassword_file = "{secret}"\n[run]'
    )
    assert (
        load(write_config(with_account), Checker.GALERA, env={}).clusters[0].unresponsive_after_ms
        == 1500
    )
    too_short = with_account.replace("= 1500", "= 50")
    assert problems_of(write_config(too_short))[0].startswith("cluster[0].unresponsive_after_ms:")
    only_the_time = GOOD + "unresponsive_after_ms = 1500\n"
    assert (
        load(write_config(only_the_time), Checker.GALERA, env={}).clusters[0].unresponsive_after_ms
        == 0
    )


def test_node_admin_without_a_user_is_one_problem(write_config: WriteConfig) -> None:
    text = GOOD.replace("[run]", '[node_admin]\npassword_file = "{secret}"\n[run]')
    assert problems_of(write_config(text)) == [
        "node_admin.user: missing (required when [node_admin] is set)"
    ]


def test_eviction_is_galera_only(write_config: WriteConfig) -> None:
    problems = problems_of(write_config(GOOD + "evict_dead_nodes = true\n"), Checker.GR)
    assert problems[0] == "cluster[0].evict_dead_nodes: only galera-checker uses this key"


@pytest.mark.parametrize(("after_ms", "warned"), [(500, True), (800, False), (1500, False)])
def test_an_unresponsive_threshold_below_the_read_timeout_is_said(
    write_config: WriteConfig, after_ms: int, warned: bool
) -> None:
    """A member is silent only after a question goes unanswered for monitor.read_timeout_ms
    (800 by default): a shorter threshold cannot act sooner, and check-config says so."""
    text = (
        GOOD.replace("[run]", '[node_admin]\nuser = "nodeadmin"\npassword_file = "{secret}"\n[run]')
        + f"evict_unresponsive_nodes = true\nunresponsive_after_ms = {after_ms}\n"
    )
    said = [w for w in load(write_config(text), Checker.GALERA, env={}).warnings if "silent" in w]
    assert bool(said) is warned
    if warned:
        assert "unresponsive_after_ms (500) is below monitor.read_timeout_ms (800)" in said[0]


@pytest.mark.parametrize(("option", "said"), [("", False), ("evict_unresponsive_nodes", True)])
def test_check_config_says_how_each_mode_gives_an_eviction_its_time(
    write_config: WriteConfig, option: str, said: bool
) -> None:
    """Informational, not a warning: no cadence leaves the stall wait short."""
    text = GOOD.replace(
        "[run]", '[node_admin]\nuser = "nodeadmin"\npassword_file = "{secret}"\n[run]'
    )
    if option:
        text += f"{option} = true\nunresponsive_after_ms = 1500\n"
    result = CliRunner().invoke(
        build_galera(), ["--config", str(write_config(text)), "check-config"]
    )
    assert result.exit_code == 0, result.output
    line = "cluster main: evict_unresponsive_nodes: the causal reads' whole stall wait"
    assert (line in result.output) is said, result.output
    assert "warning: cluster main: evict_unresponsive" not in result.output
    if said:
        assert "a scheduler pass (run) evicts once its pass line is out" in result.output
        assert "galera.main.evict.lock" in result.output
