"""What a person reads and types: an interaction drawn as a card, its status and tally lines,
Markdown, text split to a platform's limits, command spelling and parsing, notices.
Imports the top, ``config/``, ``interactions/`` and ``store/`` (no I/O of its own)."""
