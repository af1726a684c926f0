"""``[platforms.memory]``: the in-process platform's settings and their help.

The table names the platform for the config's rules (every project needs its ``allow_from``);
``agent-gateway run`` does not start it: tests and embeddings make their own
:class:`~platforms.memory.platform.MemoryPlatform`.
"""

from __future__ import annotations

from pydantic import Field

from gateway.config.platform_tables import PlatformConfig, PlatformTable

__all__ = ["HELP", "TABLE", "MemoryConfig"]

HELP = """\
[platforms.memory]
# The in-process platform of tests and embeddings; its defaults are the strictest limits.
# "agent-gateway run" does not start it.
# Largest button payload in bytes (Telegram callback_data: 64).
callback_max_bytes = 64
# Longest message text; a longer command or diff is sent as an attachment.
text_max_chars = 4096
# How soon a button click must be acknowledged (Slack: 3 seconds).
ack_deadline_seconds = 3.0
"""


class MemoryConfig(PlatformConfig):
    """The in-process platform of tests and embeddings; its limits are the strictest."""

    callback_max_bytes: int = Field(default=64, ge=16, le=4096)  # Telegram callback_data
    text_max_chars: int = Field(default=4096, ge=100)
    ack_deadline_seconds: float = Field(default=3.0, gt=0)


TABLE = PlatformTable(model=MemoryConfig, help=HELP)
