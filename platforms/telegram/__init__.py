"""Telegram (python-telegram-bot 22): approvals and questions on a phone.

See platform.py for the contract and lifetime (``TelegramPlatform``, ``MENU``), config.py for
the ``[platforms.telegram]`` table, updates.py for what comes in, forms.py for question forms,
render.py for how a card looks, outbox.py for pacing, receive.py and webhook.py for taking
updates. Importing the package imports nothing, so that reading the config (config.py) never
brings in the SDK.
"""
