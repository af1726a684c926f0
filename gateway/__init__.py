"""agent-gateway: drive local coding agents from chat platforms."""

__version__ = "0.1.0"
