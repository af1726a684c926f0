"""The config file: what loads, what is refused, and how a refusal reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.config import model as module
from gateway.config.model import (
    ApprovalPolicy,
    CollaborationMode,
    ConfigProblem,
    PermissionMode,
    SandboxMode,
    SessionScope,
    check_config,
)
from gateway.config.policy_rules import PolicyRule
from gateway.config.sources import KeyLocator
from gateway.domain import Actor, AgentKind
from gateway.errors import ConfigError
from platforms.console.config import ConsoleConfig
from platforms.memory.config import MemoryConfig
from platforms.registry import PLATFORMS, load_config, parse_config
from platforms.telegram.config import TelegramConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_ENV = {
    "TELEGRAM_BOT_TOKEN": "123456:telegram-secret-value",
    "SLACK_BOT_TOKEN": "xoxb-1-slack-secret-value",
    "SLACK_APP_TOKEN": "xapp-1-A1-1-slack-app-secret",
    "DISCORD_BOT_TOKEN": "MTIz.discord.secret-value",
}

MINIMAL = """\
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"

[projects.web.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""


KNOWN = ", ".join(sorted(PLATFORMS.names()))


def refusal(text: str, env: dict[str, str] | None = None, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "gw.toml", env=env or {}, **kwargs)  # type: ignore[arg-type]
    return str(caught.value)


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` containing ``needle``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


# --- what loads ----------------------------------------------------------------------------


def commented(table: str) -> str:
    """A platform's table as the example keeps it when it is off: every line behind "# "."""
    return "\n".join(f"# {line}" if line else "#" for line in table.split("\n"))


def every_platform_on(example: str) -> str:
    """The example with each platform's commented table turned on, as its comment says."""
    for name in PLATFORMS.names():
        example = example.replace(commented(PLATFORMS.table(name).help), PLATFORMS.table(name).help)
    return example


def test_the_example_file_turns_one_platform_on_and_loads() -> None:
    config = load_config(ROOT / "config.example.toml", env=EXAMPLE_ENV)
    assert config.platforms.enabled() == ("telegram",)


def test_the_example_file_loads_with_every_platform_turned_on() -> None:
    text = every_platform_on((ROOT / "config.example.toml").read_text())
    config = parse_config(text, "config.example.toml", env=EXAMPLE_ENV, base_dir=ROOT)

    assert (
        config.platforms.enabled()
        == PLATFORMS.names()
        == ("console", "telegram", "slack", "discord", "memory")
    )
    web, notes = config.projects["web"], config.projects["notes"]
    assert web.agent is AgentKind.CODEX_APP_SERVER
    assert web.work_dir == ROOT  # "." is the folder of the config file
    assert web.agent_options.approval_policy is ApprovalPolicy.ON_REQUEST
    assert web.agent_options.sandbox is SandboxMode.WORKSPACE_WRITE
    assert web.agent_options.agent_env() == {"RUST_LOG": "warn"}
    assert web.auth["telegram"].approvers == ("123456789",)
    assert web.auth["local"].approvers is None  # the session's initiator
    # options written flat land in agent_options
    assert notes.agent is AgentKind.CLAUDE_CODE
    assert notes.scope is SessionScope.CHANNEL
    assert notes.agent_options.permission_mode is PermissionMode.DEFAULT
    assert notes.argv() == ("claude",)
    telegram = config.platforms.get("telegram", TelegramConfig)
    assert telegram is not None
    assert telegram.token.get_secret_value() == "123456:telegram-secret-value"
    console = config.platforms.get("console", ConsoleConfig)
    assert console is not None
    assert console.actor() == Actor(platform="local", user_id="alice")


def test_every_key_of_the_schema_is_documented_in_the_example() -> None:
    example = (ROOT / "config.example.toml").read_text()
    written = set(re.findall(r"^(?:#\s*)*([a-z_]+)\s*=", example, flags=re.MULTILINE))
    written |= {"token_file", "secret_token_file"} & set(example.split())
    models: list[type[BaseModel]] = [
        module.GatewaySection,
        module.RetentionSection,
        module.ProjectConfig,
        module.AgentOptions,
        module.ExpiryPolicy,
        module.FilesPolicy,
        module.TranscriptionConfig,
        module.SendFilePolicy,
        module.PlatformAuth,
        PolicyRule,
        module.ScheduleEntry,
        *(PLATFORMS.table(name).model for name in PLATFORMS.names()),
    ]
    keys = {key for model in models for key in model.model_fields}
    keys -= {
        "agent_options",
        "env",
        "expiry",
        "files",
        "auth",
        "policy",
        "retention",
        "schedule",
        "send_file",
    }  # tables
    assert keys - written == set()


def test_the_example_shows_each_platform_table_as_its_config_module_documents_it() -> None:
    example = (ROOT / "config.example.toml").read_text()
    for name in PLATFORMS.names():
        table = PLATFORMS.table(name)
        assert table.help.startswith(f"[platforms.{name}]\n")
        shown = table.help if name == "telegram" else commented(table.help)  # the one on
        assert shown in example, name


def test_the_example_names_each_platforms_own_api_address_key() -> None:
    """The platforms' introduction says which key points each chat platform at its API:
    Discord's is api_base_url, not the base_url the others take."""
    example = (ROOT / "config.example.toml").read_text()
    start = example.index("# --- platforms")
    intro = example[start : example.index("\n[platforms.", start)]
    named = set(re.findall(r"\b([a-z_]*base_url)\b", intro))
    keys = {
        key
        for name in PLATFORMS.names()
        for key in PLATFORMS.table(name).model.model_fields
        if key.endswith("base_url")
    }
    assert named == keys, (named, keys)
    assert "api_base_url (and\n# gateway_url, its websocket) for Discord" in intro


def test_an_unknown_platform_table_is_refused_with_the_known_ones() -> None:
    text = MINIMAL + '\n[platforms.matrix]\nbot_token = "xoxb-1"\napp_token = "xapp-1"\n'
    text = text.replace('["*"]', '["*"]\n[projects.web.auth.telegram]\nallow_from = ["1"]')
    message = refusal(text)
    line = line_of(text, "[platforms.matrix]")
    assert f"gw.toml:{line}: platforms.matrix: unknown platform; one of {KNOWN}" in message
    assert "platforms.matrix.bot_token" not in message  # its keys are not looked at

    not_a_table = "platforms = 1\n" + MINIMAL.replace("[platforms.memory]\n", "")
    assert "gw.toml:1: platforms: should be a table" in refusal(not_a_table)


def test_auth_tables_and_the_console_identity_take_only_the_registered_platforms() -> None:
    text = MINIMAL.replace("[projects.web.auth.memory]", "[projects.web.auth.matrix]")
    message = refusal(text)
    line = line_of(text, "auth.matrix")
    tables = ", ".join(sorted(PLATFORMS.auth_tables()))  # discord, local, memory, slack, telegram
    assert f"gw.toml:{line}: projects.web.auth.matrix: unknown platform; one of {tables}" in message

    console = MINIMAL + '\n[platforms.console]\nidentity = "matrix:U1"\n'
    message = refusal(console)
    line = line_of(console, "identity")
    assert f"gw.toml:{line}: platforms.console.identity: unknown platform 'matrix'" in message
    assert f"one of {tables}" in message
    assert 'should be "<platform>:<user id>"' in refusal(console.replace("matrix:U1", "alice"))


def test_a_platform_table_missing_a_key_is_followed_by_its_help() -> None:
    text = MINIMAL.replace("memory", "telegram") + 'tokn = "123:abc"\n'
    message = refusal(text)
    assert (
        f"gw.toml:{line_of(text, '[platforms.telegram]')}: platforms.telegram.token: required"
        in message
    )
    tokn = line_of(text, "tokn")
    assert f"gw.toml:{tokn}: platforms.telegram.tokn: unknown key; did you mean 'token'?" in message
    help_text = message.split(
        "platforms.telegram: its keys, as config.example.toml documents them:\n"
    )[1]
    assert help_text.split() == PLATFORMS.table("telegram").help.split()
    # a wrong value is explained by its own message
    assert "its keys" not in refusal(
        MINIMAL.replace("[platforms.memory]", "[platforms.memory]\ntext_max_chars = 1")
    )


def test_defaults_of_a_minimal_file() -> None:
    config = parse_config(MINIMAL, env={})
    assert config.gateway.queue_depth == 20
    assert config.gateway.data_dir == Path("~/.local/share/agent-gateway").expanduser()
    web = config.projects["web"]
    assert web.scope is SessionScope.THREAD
    assert web.argv() == ("codex",)
    assert web.agent_options.allow_dangerous is False
    assert web.expiry.after_seconds is None  # never expires
    memory = config.platforms.get("memory", MemoryConfig)
    assert memory is not None
    assert memory.callback_max_bytes == 64
    assert memory.text_max_chars == 4096


def test_env_variables_are_interpolated_and_dollar_dollar_is_literal() -> None:
    text = MINIMAL.replace('"/srv/web"', '"${BASE}/web"') + (
        '[projects.web.agent_options.env]\nNOTE = "$${NOT_A_VAR}"\n'
    )
    config = parse_config(text, env={"BASE": "/home/ann"})
    assert config.projects["web"].work_dir == Path("/home/ann/web")
    assert config.projects["web"].agent_options.agent_env() == {"NOTE": "${NOT_A_VAR}"}


def test_a_missing_env_variable_names_the_key_and_line() -> None:
    text = MINIMAL + '\n[platforms.telegram]\ntoken = "${TELEGRAM_TOKEN}"\n'
    text = text.replace('["*"]', '["*"]\n[projects.web.auth.telegram]\nallow_from = ["1"]')
    message = refusal(text)
    line = line_of(text, "TELEGRAM_TOKEN")
    assert f"gw.toml:{line}: platforms.telegram.token:" in message
    assert "TELEGRAM_TOKEN is not set" in message


def test_secret_files_are_read_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "tg.token").write_text("987:file-secret\n")
    (tmp_path / "gw.toml").write_text(
        MINIMAL.replace("memory", "telegram") + 'token_file = "tg.token"\n'
    )
    config = load_config(tmp_path / "gw.toml", env={})
    telegram = config.platforms.get("telegram", TelegramConfig)
    assert telegram is not None
    assert telegram.token.get_secret_value() == "987:file-secret"


def test_a_missing_secret_file_and_a_doubled_secret_are_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace("memory", "telegram") + 'token_file = "absent.token"\n'
    message = refusal(text, base_dir=tmp_path)
    assert f"gw.toml:{line_of(text, 'token_file')}: platforms.telegram.token_file:" in message
    assert "absent.token" in message

    doubled = text + 'token = "x"\n'
    assert "give either token or token_file" in refusal(doubled, base_dir=tmp_path)


def test_secrets_never_appear_in_repr_or_errors() -> None:
    secret = "987654:very-secret"
    text = MINIMAL.replace("memory", "telegram") + f'token = "{secret}"\nsecret_token = 5\n'
    assert secret not in refusal(text)
    with pytest.raises(ConfigError) as caught:
        parse_config(text.replace(f'token = "{secret}"', f'token = ["{secret}"]'), env={})
    assert caught.value.__context__ is None  # pydantic's own message would quote the input
    assert secret not in str(caught.value)

    ok = text.replace("secret_token = 5", 'secret_token = "${HOOK}"')
    config = parse_config(ok, env={"HOOK": "other-secret"})
    for shown in (repr(config), str(config), repr(config.platforms)):
        assert secret not in shown
        assert "other-secret" not in shown


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("approval_policy", "never"),
        ("sandbox", "danger-full-access"),
    ],
)
def test_dangerous_codex_modes_need_an_explicit_opt_in(key: str, value: str) -> None:
    text = MINIMAL.replace(
        'agent = "codex-app-server"', f'agent = "codex-app-server"\n{key} = "{value}"'
    )
    message = refusal(text)
    assert f"gw.toml:{line_of(text, key)}: projects.web.agent_options.{key}:" in message
    assert "allow_dangerous = true" in message

    allowed = text.replace(f'{key} = "{value}"', f'{key} = "{value}"\nallow_dangerous = true')
    assert getattr(parse_config(allowed, env={}).projects["web"].agent_options, key) == value


@pytest.mark.parametrize("mode", ["bypassPermissions", "auto"])
def test_claude_modes_where_nobody_is_asked_need_an_opt_in(mode: str) -> None:
    text = MINIMAL.replace("codex-app-server", "claude-code") + (
        f'[projects.web.agent_options]\npermission_mode = "{mode}"\n'
    )
    message = refusal(text)
    assert f"gw.toml:{line_of(text, 'permission_mode')}: projects.web.agent_options" in message
    assert "allow_dangerous" in message
    parse_config(text + "allow_dangerous = true\n", env={})


def test_options_of_another_agent_are_refused() -> None:
    text = MINIMAL.replace("codex-app-server", "claude-code").replace(
        'agent = "claude-code"', 'agent = "claude-code"\nsandbox = "read-only"'
    )
    message = refusal(text)
    assert f"gw.toml:{line_of(text, 'sandbox')}: projects.web.agent_options.sandbox:" in message
    assert "does not apply to agent claude-code" in message


def test_an_acp_agent_needs_an_argv_and_takes_no_codex_or_model_options() -> None:
    text = MINIMAL.replace('agent = "codex-app-server"', 'agent = "acp"\nsandbox = "read-only"')
    message = refusal(text)
    assert "projects.web.agent_options.argv: agent acp needs an argv" in message
    assert "projects.web.agent_options.sandbox: does not apply to agent acp" in message
    assert "does not apply to agent acp" in refusal(
        MINIMAL.replace('agent = "codex-app-server"', 'agent = "acp"\nargv = ["a"]\nmodel = "m"')
    )
    config = parse_config(
        MINIMAL.replace('agent = "codex-app-server"', 'agent = "acp"\nargv = ["codex-acp"]'),
        "gw.toml",
        env={},
    )
    assert config.projects["web"].argv() == ("codex-acp",)


def test_an_attached_opencode_server_takes_url_and_password_file_together(
    tmp_path: Path,
) -> None:
    def opencode(keys: str) -> str:
        return MINIMAL.replace('agent = "codex-app-server"', f'agent = "opencode"\n{keys}')

    url = 'url = "http://127.0.0.1:4096"'
    password = 'password_file = "secret/pw"'
    assert "agent_options.url: needs password_file" in refusal(opencode(url))
    assert "agent_options.password_file: needs url" in refusal(opencode(password))
    with_argv = refusal(opencode(f'{url}\n{password}\nargv = ["opencode"]'))
    assert "agent_options.argv: does not apply to an attached OpenCode server" in with_argv
    assert "does not apply to agent codex-app-server" in refusal(
        MINIMAL.replace('agent = "codex-app-server"', f'agent = "codex-app-server"\n{url}')
    )
    text = opencode(f"{url}\n{password}").replace("/srv/web", str(tmp_path))
    config = parse_config(text, "gw.toml", env={}, base_dir=tmp_path)
    project = config.projects["web"]
    assert project.attached and project.agent_options.password_file == tmp_path / "secret/pw"
    # check looks for no opencode binary, but for the password file
    [problem] = check_config(config)
    assert "projects.web.agent_options.password_file: cannot read password file" in str(problem)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "pw").write_text("hunter2\n")
    assert check_config(config) == ()


def test_plan_mode_by_default_is_a_codex_app_server_setting() -> None:
    text = MINIMAL.replace(
        'agent = "codex-app-server"', 'agent = "codex-app-server"\ncollaboration_mode = "plan"'
    )
    options = parse_config(text, env={}).projects["web"].agent_options
    assert options.collaboration_mode is CollaborationMode.PLAN
    for agent in ("codex-exec", "claude-code"):
        message = refusal(text.replace("codex-app-server", agent))
        assert f"{line_of(text, 'collaboration_mode')}: projects.web.agent_options" in message
        assert f"does not apply to agent {agent}" in message


def test_an_enabled_platform_without_allow_from_refuses_to_start() -> None:
    text = MINIMAL + '\n[platforms.console]\nidentity = "telegram:42"\n'
    message = refusal(text)
    # the console acts as a telegram user: its people are checked against auth.telegram
    assert "projects.web.auth.telegram.allow_from:" in message
    assert f"gw.toml:{line_of(text, '[projects.web]')}:" in message
    assert "platform console is enabled" in message

    empty = text + "[projects.web.auth.telegram]\nallow_from = []\n"
    line = line_of(empty, "allow_from = []")
    assert f"gw.toml:{line}: projects.web.auth.telegram.allow_from:" in refusal(empty)

    numeric = text + "[projects.web.auth.telegram]\nallow_from = [42]\n"
    assert parse_config(numeric, env={}).projects["web"].auth["telegram"].allow_from == ("42",)


def test_approvers_must_be_people_allowed_to_talk() -> None:
    text = MINIMAL.replace('allow_from = ["*"]', 'allow_from = ["1"]\napprovers = ["1", "2"]')
    message = refusal(text)
    assert f"gw.toml:{line_of(text, 'approvers')}: projects.web.auth.memory.approvers:" in message
    assert "not in allow_from: 2" in message


def test_unknown_keys_wrong_types_and_missing_keys_name_key_and_line() -> None:
    text = (
        "[gateway]\n"
        "queue_depth = 0\n"  # 2
        "\n"
        "[projects.web]\n"  # 4
        'agent = "codex-app-server"\n'
        'scope = "room"\n'  # 6
        'modle = "gpt"\n'  # 7
        "\n"
        "[projects.web.auth.memory]\n"
        'allow_from = "*"\n'  # 10
        "\n"
        "[platforms.memory]\n"
    )
    message = refusal(text)
    assert "gw.toml:2: gateway.queue_depth: should be greater than or equal to 1" in message
    assert "gw.toml:4: projects.web.work_dir: required key is missing" in message
    assert "gw.toml:6: projects.web.scope: should be 'thread', 'channel' or 'user'" in message
    assert "gw.toml:7: projects.web.modle: unknown key; did you mean 'model'?" in message
    assert "gw.toml:10: projects.web.auth.memory.allow_from: should be an array" in message


def test_a_data_dir_inside_a_work_dir_is_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace("/srv/web", str(tmp_path)) + (
        f'[gateway]\ndata_dir = "{tmp_path}/.gateway"\n'
    )
    message = refusal(text)
    assert f"gateway.data_dir: {tmp_path}/.gateway lies inside the work dir of project web" in (
        message
    )
    assert "give each project a folder of its own" in message


def test_the_example_copied_to_a_home_folder_says_so_once_with_its_fix(tmp_path: Path) -> None:
    """Every project of the example works in the config's folder ("."): copied to the home
    folder, whose data dir is inside it, one problem names them all, with the fix."""
    home = tmp_path / "home"
    home.mkdir()
    text = every_platform_on((ROOT / "config.example.toml").read_text()).replace(
        "~/.local/share/agent-gateway", str(home / ".local" / "share" / "agent-gateway")
    )
    message = refusal(text, EXAMPLE_ENV, base_dir=home)
    assert message.count("lies inside the work dir") == 1, message
    assert "of project web, notes, oc" in message


def test_toml_syntax_errors_name_the_line() -> None:
    message = refusal('[projects.web]\nagent = "codex\n')
    assert message.startswith("gw.toml: not valid TOML")
    assert "line 2" in message


def test_check_reports_a_missing_work_dir_and_agent_binary(tmp_path: Path) -> None:
    text = MINIMAL.replace("/srv/web", str(tmp_path / "absent")).replace(
        'agent = "codex-app-server"',
        f'agent = "codex-app-server"\nargv = ["{tmp_path}/no-codex"]',
    )
    problems = check_config(parse_config(text, "gw.toml", env={}))
    assert [str(problem) for problem in problems] == [
        f"gw.toml:2: projects.web.work_dir: {tmp_path / 'absent'} is not a directory",
        f"gw.toml:4: projects.web.agent_options.argv: agent program "
        f"'{tmp_path}/no-codex' not found (set argv to its path)",
    ]
    assert all(isinstance(problem, ConfigProblem) for problem in problems)


# --- the line finder is a heuristic: pin down what it promises ----------------------------


def test_key_locator_finds_headers_dotted_quoted_and_inline_keys() -> None:
    text = (
        "top = 1\n"  # 1
        '[projects."my app"]\n'  # 2
        'work_dir = "/x"\n'  # 3
        'notes = """\n'  # 4
        "fake = 1\n"  # 5: inside a multi-line string
        '"""\n'  # 6
        'auth.slack = { allow_from = ["U1"] }\n'  # 7
        "[projects.other]\n"  # 8
        "model = 'm'\n"  # 9
    )
    locator = KeyLocator(text)
    assert locator.line_of(("top",)) == 1
    assert locator.line_of(("projects", "my app", "work_dir")) == 3
    assert locator.line_of(("projects", "my app", "fake")) == 2  # not the string's content
    assert locator.line_of(("projects", "my app", "auth", "slack", "allow_from", 0)) == 7
    assert locator.line_of(("projects", "my app", "agent")) == 2  # missing: its table
    assert locator.line_of(("projects", "other", "agent_options", "model")) == 9  # flat
    assert locator.line_of(("platforms",)) is None


def test_retention_keeps_texts_no_longer_than_the_audit() -> None:
    said = refusal("[gateway.retention]\ntext_days = 400\naudit_days = 365\n\n" + MINIMAL)
    assert "gateway.retention" in said and "text_days is at most audit_days" in said
    assert "batch_rows" in refusal("[gateway.retention]\nbatch_rows = 0\n\n" + MINIMAL)
    retention = parse_config(MINIMAL, "gw.toml", env={}).gateway.retention
    assert (retention.enabled, retention.text_days, retention.audit_days) == (True, 30, 365)


SCHEDULED = MINIMAL.replace(
    "[platforms.memory]",
    """[[projects.web.schedule]]
name = "weekday-tests"
cron = "0 9 * * 1-5"
text = "run the tests"
channel = "memory:#team/room"
creator = "memory:alice"

[platforms.memory]""",
)


def test_a_schedule_entry_loads_with_its_cron_and_zone() -> None:
    text = SCHEDULED.replace('cron = "0 9 * * 1-5"', 'cron = "weekdays"')
    text = text.replace(
        'agent = "codex-app-server"', 'agent = "codex-app-server"\ntime_zone = "Europe/Berlin"'
    )
    config = parse_config(text, "gw.toml", env={})
    [entry] = config.projects["web"].schedule
    assert (entry.name, entry.cron, entry.channel) == (
        "weekday-tests",
        "0 9 * * 1-5",
        "memory:#team/room",
    )
    assert config.projects["web"].time_zone == "Europe/Berlin"


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('cron = "0 9 * * 1-5"', 'cron = "0 9 * * 8"', "the day-of-week field `8`"),
        ('channel = "memory:#team/room"', 'channel = "room"', "platform:#channel"),
        ('creator = "memory:alice"', 'creator = "alice"', '"platform:user id"'),
        ('name = "weekday-tests"', 'name = "weekday tests"', "schedule.0.name"),
        (
            'agent = "codex-app-server"',
            'agent = "codex-app-server"\ntime_zone = "Mars/Base"',
            "Mars/Base",
        ),
    ],
)
def test_a_bad_schedule_entry_is_refused_naming_the_key(old: str, new: str, said: str) -> None:
    text = SCHEDULED.replace(old, new)
    message = refusal(text)
    assert said in message
    assert "projects.web." in message


def test_two_schedule_entries_of_one_name_are_refused() -> None:
    entry = SCHEDULED[SCHEDULED.index("[[projects.web.schedule]]") : SCHEDULED.index("[platforms")]
    text = SCHEDULED.replace("[platforms.memory]", entry + "[platforms.memory]")
    assert "schedule names must be unique in a project: weekday-tests" in refusal(text)


def test_an_unknown_scheduler_is_refused() -> None:
    text = MINIMAL.replace(
        'agent = "codex-app-server"', 'agent = "codex-app-server"\nschedulers = ["leads"]'
    )
    assert 'projects.web.schedulers: unknown group or person "leads"' in refusal(text)


PEOPLE_TABLES = MINIMAL.replace(
    "[platforms.memory]",
    """[people]
bob = ["memory:bob"]

[people.alice]
accounts = ["memory:alice", "slack:U1"]
time_zone = "Asia/Tokyo"

[platforms.memory]""",
)


def test_a_person_written_as_a_table_gives_their_accounts_and_time_zone() -> None:
    config = parse_config(PEOPLE_TABLES, "gw.toml", env={})
    assert config.people == {"bob": ("memory:bob",), "alice": ("memory:alice", "slack:U1")}
    assert config.time_zone_of("slack:U1") == "Asia/Tokyo"
    assert config.time_zone_of("memory:bob") is None
    assert config.time_zone_of("memory:carol") is None


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            'time_zone = "Asia/Tokyo"',
            'time_zone = "Asia/Tokio"',
            "gw.toml:13: people.alice.time_zone: unknown time zone 'Asia/Tokio'"
            " (did you mean 'Asia/Tokyo'?)",
        ),
        (
            'time_zone = "Asia/Tokyo"',
            'timezone = "Asia/Tokyo"',
            "gw.toml:13: people.alice.timezone: unknown key; did you mean 'time_zone'?",
        ),
        ('accounts = ["memory:alice", "slack:U1"]\n', "", "people.alice.accounts"),
    ],
)
def test_a_bad_person_table_is_refused_naming_the_key(old: str, new: str, said: str) -> None:
    assert said in refusal(PEOPLE_TABLES.replace(old, new))


def test_a_reload_applies_a_persons_new_time_zone() -> None:
    from gateway.config.reload import reloadable_changes

    old = parse_config(PEOPLE_TABLES, "gw.toml", env={})
    new = parse_config(PEOPLE_TABLES.replace("Asia/Tokyo", "Europe/Berlin"), "gw.toml", env={})
    assert reloadable_changes(old, new) == ["people"]
    assert new.time_zone_of("memory:alice") == "Europe/Berlin"


def test_a_config_schedule_without_a_zone_takes_its_creators_then_the_projects() -> None:
    from datetime import UTC, datetime

    from gateway.sessions.schedule_desk import configured_drafts

    people = '[people.alice]\naccounts = ["memory:alice"]\ntime_zone = "Asia/Tokyo"\n\n'
    now = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday
    [draft] = configured_drafts(parse_config(people + SCHEDULED, env={}), "web", now)
    assert (draft.zone, draft.next_at) == ("Asia/Tokyo", datetime(2026, 3, 30, 0, 0, tzinfo=UTC))
    [draft] = configured_drafts(parse_config(SCHEDULED, env={}), "web", now)
    assert (draft.zone, draft.next_at) == ("UTC", datetime(2026, 3, 30, 9, 0, tzinfo=UTC))
