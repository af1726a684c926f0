"""``[platforms.discord]`` and ``role:<id>`` in auth: what a Discord setup may say, and who
it lets in (roles fail closed where nobody holds one: a DM)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.config.access import approver_ids, may_decide, may_talk
from gateway.config.model import Config
from gateway.domain import Actor
from gateway.errors import ConfigError
from platforms.discord.config import NEEDED_PERMISSIONS, DiscordConfig, Permission, invite_url
from platforms.registry import parse_config

BASE = """\
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"
auth.discord = { allow_from = ["111", "role:900"], approvers = ["111", "role:901"] }

[platforms.discord]
token = "${DISCORD_BOT_TOKEN}"
application_id = "424242"
"""
ENV = {"DISCORD_BOT_TOKEN": "MTIz.abc.def"}


def refusal(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "gw.toml", env=ENV if env is None else env)
    return str(caught.value)


def test_a_minimal_table_takes_the_defaults() -> None:
    config = parse_config(BASE.replace(', "role:901"', ', "role:900"'), env=ENV)
    settings = config.platforms.get("discord", DiscordConfig)
    assert isinstance(settings, DiscordConfig)
    assert settings.token.get_secret_value() == "MTIz.abc.def"
    assert settings.guild_ids == () and settings.channels == ()
    assert settings.message_content is False
    assert settings.max_ratelimit_timeout == 60.0
    assert settings.api_base == "https://discord.com/api/v10"
    assert settings.gateway_url == "wss://gateway.discord.gg/"
    assert "MTIz" not in repr(settings)  # the token is never shown


def test_the_token_may_come_from_a_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "token").write_text("MTIz.file.token\n")
    text = BASE.replace('token = "${DISCORD_BOT_TOKEN}"', 'token_file = "token"')
    text = text.replace(', "role:901"', "")
    config = parse_config(text, env={}, base_dir=tmp_path)
    settings = config.platforms.get("discord", DiscordConfig)
    assert isinstance(settings, DiscordConfig)
    assert settings.token.get_secret_value().strip() == "MTIz.file.token"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("max_ratelimit_timeout = 5", "platforms.discord.max_ratelimit_timeout"),
        ('guild_ids = ["abc"]', "platforms.discord.guild_ids"),
        ('channels = ["0"]', "platforms.discord.channels"),
        ('gateway_url = "http://x y"', "platforms.discord.gateway_url"),
        ('intents = "all"', "platforms.discord.intents: unknown key"),
    ],
)
def test_wrong_values_are_refused_at_their_key(line: str, said: str) -> None:
    assert said in refusal(BASE.replace(', "role:901"', "") + line + "\n")


def test_a_token_with_bot_before_it_is_refused_without_being_echoed() -> None:
    message = refusal(BASE, env={"DISCORD_BOT_TOKEN": "Bot MTIz.secret.x"})
    assert 'without "Bot "' in message
    assert "MTIz.secret" not in message
    assert "is empty" in refusal(BASE, env={"DISCORD_BOT_TOKEN": "  "})


def test_an_approver_role_not_allowed_to_talk_is_refused() -> None:
    assert "approvers not in allow_from: role:901" in refusal(BASE)


def test_the_invite_asks_for_exactly_the_permissions_the_bot_uses() -> None:
    url = urlsplit(invite_url("424242"))
    assert (url.scheme, url.netloc, url.path) == ("https", "discord.com", "/oauth2/authorize")
    query = parse_qs(url.query)
    assert query["client_id"] == ["424242"]
    assert query["scope"] == ["bot applications.commands"]
    granted = Permission(int(query["permissions"][0]))
    assert granted == NEEDED_PERMISSIONS
    assert Permission.CREATE_PUBLIC_THREADS in granted
    assert Permission.ADD_REACTIONS in granted  # the queued mark
    assert int(granted) == 309237763136  # no administrator, no manage-anything


# --- roles -----------------------------------------------------------------------------


@pytest.fixture
def config() -> Config:
    text = BASE.replace('"role:900"]', '"role:900", "role:901"]')
    return parse_config(text, env=ENV)


def member(user: str, *roles: str) -> Actor:
    return Actor(platform="discord", user_id=user, display=user, roles=roles)


def test_a_role_lets_its_members_talk_and_decide(config: Config) -> None:
    assert may_talk(config, "web", member("222", "900"))
    assert not may_decide(config, "web", member("222", "900"), session_initiator=None)
    assert may_decide(config, "web", member("333", "901"), session_initiator=None)
    assert may_decide(config, "web", member("111"), session_initiator=None)


def test_roles_fail_closed_without_a_member(config: Config) -> None:
    # the same person in a DM: no member, no roles
    assert not may_talk(config, "web", member("222"))
    assert not may_decide(config, "web", member("333"), session_initiator=None)
    assert not may_talk(config, "web", member("222", "899"))


def test_a_user_id_shaped_like_a_role_entry_is_not_that_role(config: Config) -> None:
    assert not may_talk(config, "web", member("role:900"))


def test_roles_are_not_who_someone_is() -> None:
    assert member("1", "900") == member("1")


def test_a_new_card_mentions_approver_roles_that_may_talk(config: Config) -> None:
    assert approver_ids(config, "web", "discord", None) == ("111", "role:901")


def test_discord_invite_prints_the_url_from_the_config_or_an_id(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from gateway.app.cli import main

    assert main(["discord-invite", "--application-id", "424242"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == invite_url("424242")
    path = tmp_path / "gateway.toml"
    path.write_text(BASE.replace(', "role:901"', "").replace("${DISCORD_BOT_TOKEN}", "x.y.z"))
    assert main(["discord-invite", "--config", str(path)]) == 0
    assert capsys.readouterr().out.strip() == printed
    assert main(["discord-invite", "--application-id", "abc"]) == 2
    assert "is a number" in capsys.readouterr().err
