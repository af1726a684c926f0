"""Agent adapters: sans-IO codecs plus the one stdio runtime."""
