"""The local web console: a platform served over HTTP on 127.0.0.1 (see ``platform.py``)."""

from platforms.console.platform import CONSOLE_LIMITS, ConsolePlatform

__all__ = ["CONSOLE_LIMITS", "ConsolePlatform"]
