#!/usr/bin/env bash
# Set up everything from nothing: a virtualenv with the gateway and its test tools, and the
# pinned agent CLIs (npm) in .cache/agents. Safe to run again; it only does what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=agent-versions.env
source scripts/agent-versions.env

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'

agents=.cache/agents
mkdir -p "$agents"
want="@openai/codex@${CODEX_NPM_VERSION}"
have=$(cat "$agents/.installed" 2>/dev/null || true)
if [ "$have" != "$want" ] || [ ! -x "$agents/node_modules/.bin/codex" ]; then
    npm install --prefix "$agents" --no-audit --no-fund --silent "$want"
    echo "$want" > "$agents/.installed"
fi
echo "agent-gateway set up: .venv, $("$agents/node_modules/.bin/codex" --version)"
