"""The built-in demo: an agent that speaks the Codex app-server protocol, and the command that
runs it behind the gateway (``agent-gateway demo``).

- :mod:`gateway.app.demo.agent` is a separate program (``python -m gateway.app.demo.agent``),
started
  by the real launcher as a ``codex-app-server`` project. It imports nothing from the gateway
  (standard library only) and writes the message shapes codex 0.171 writes
  (``tests/transcripts/codex-0.171/``), so that it stands for a real agent binary.
- :mod:`gateway.app.demo.command` is `agent-gateway demo`: its configuration, data dir, work dir.

Like :mod:`gateway.app.cli`, this package is an application of the core, not part of it: no core
module imports it. Nothing here is imported by ``import gateway.app.demo`` itself, so that the
agent program starts without loading the gateway.
"""
