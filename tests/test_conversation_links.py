"""The address each platform gives ``/switch`` for a conversation (issue 31): a Discord
thread, a Telegram forum topic, a Slack thread; None where the platform has none."""

from __future__ import annotations

from gateway.domain import ConversationRef
from platforms.discord.inbound import link_to as discord_link
from platforms.slack.inbound import link_to as slack_link
from platforms.telegram.inbound import link_to as telegram_link


def test_discord_links_a_thread_a_channel_and_a_dm() -> None:
    thread = ConversationRef(platform="discord", space="111", channel="222", thread="333")
    assert discord_link(thread) == "https://discord.com/channels/111/333"
    channel = ConversationRef(platform="discord", space="111", channel="222")
    assert discord_link(channel) == "https://discord.com/channels/111/222"
    dm = ConversationRef(platform="discord", space=None, channel="444")
    assert discord_link(dm) == "https://discord.com/channels/@me/444"


def test_telegram_links_a_forum_topic_only() -> None:
    topic = ConversationRef(platform="telegram", space=None, channel="-1001234567890", thread="7")
    assert telegram_link(topic) == "https://t.me/c/1234567890/7"
    general = ConversationRef(platform="telegram", space=None, channel="-1001234567890")
    assert telegram_link(general) is None
    private = ConversationRef(platform="telegram", space=None, channel="42")
    assert telegram_link(private) is None


def test_slack_links_a_thread_and_a_channel() -> None:
    thread = ConversationRef(
        platform="slack", space="T1", channel="C123", thread="1733380000.123456"
    )
    assert slack_link(thread) == "https://slack.com/archives/C123/p1733380000123456"
    assert slack_link(ConversationRef(platform="slack", space="T1", channel="C123")) == (
        "https://slack.com/archives/C123"
    )
