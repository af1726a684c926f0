"""The configuration: the TOML model and its checks, where its values come from, each
platform's table, people and groups, policy rules, who may talk and decide, the HMAC key.
Imports the top only (``gateway/*.py``)."""
