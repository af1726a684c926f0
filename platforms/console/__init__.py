"""The local web console: a platform served over HTTP on 127.0.0.1.

See platform.py (``ConsolePlatform``, ``CONSOLE_LIMITS``) and config.py for the
``[platforms.console]`` table. Importing the package imports nothing, so that reading the
config (config.py) never brings in aiohttp.
"""
