#!/usr/bin/env bash
# The whole test suite from nothing: set up, lint, type-check, test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
export AGENT_GATEWAY_CODEX_BIN=${AGENT_GATEWAY_CODEX_BIN:-$root/.cache/agents/node_modules/.bin/codex}
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# two pytest-xdist workers, a test file to each, unless the caller chose (-n 0: one process):
# the suite mostly waits on agents and fake servers, and two workers halve its time
case " $* " in
*" -n"* | *" --numprocesses"* | *" -p no:xdist "*) .venv/bin/pytest "$@" ;;
*) .venv/bin/pytest -n 2 --dist loadfile "$@" ;;
esac
