"""The in-process platform of tests and embeddings (see ``platform.py``).

Like every platform package, importing it imports nothing: ``config.py`` holds the settings
of its ``[platforms.memory]`` table (what ``agent-gateway check`` reads), ``platform.py`` the
platform itself.
"""
