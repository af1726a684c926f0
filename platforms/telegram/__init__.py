"""Telegram (python-telegram-bot 22): approvals and questions on a phone.

See platform.py for the contract and lifetime, updates.py for what comes in, forms.py for
question forms, render.py for how a card looks, outbox.py for pacing, receive.py and
webhook.py for taking updates.
"""

from platforms.telegram.platform import MENU, TelegramPlatform

__all__ = ["MENU", "TelegramPlatform"]
