"""Discord: team channels and DMs through discord.py (gateway websocket + REST v10)."""
