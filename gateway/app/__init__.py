"""The applications: ``agent-gateway``'s command line and the demo. The only modules of
``gateway/`` that import ``platforms/`` and ``adapters/``; nothing imports them."""
