"""Benchmarks: what the gateway costs, measured (figures and ratios, never assertions).

``python -m bench`` runs them all (bench/__main__.py); each is also a module of its own:

- ``bench.interactions``: one approval's overhead, ledger writes included (p50/p99/max);
- ``bench.throughput``: agent message deltas per second through adapter, engine and platform,
  against a bare read-and-parse loop, and a million-delta burst (exact text, peak RSS);
- ``bench.concurrency``: 200 sessions of approvals at once (exactly once, RSS, CPU);
- ``bench.startup``: ``agent-gateway run`` and ``demo`` to ready, import times, and no
  platform imported that is not configured;
- ``bench.telegram_pacing``: which way of pacing Telegram calls avoids 429s;
- ``bench.files_in``: a 20 MB Telegram document to the agent's disk (time, and the gateway's
  peak RSS against idle: the download is streamed).

The scripted agent is ``bench/agents/codex_bench_agent.py`` (Codex app-server 0.171 shapes);
the platforms a benchmark can drive are in ``bench/platforms.py``.
"""
