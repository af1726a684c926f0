"""What runs a session: the engine and its control channel, the runner and broker, the click
and grant desks, outbound streams, receivers, routing, the agent protocol the adapters meet.
Imports every package of ``gateway/`` but ``app/``."""
