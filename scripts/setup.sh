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
# install_agent PACKAGE VERSION BIN: npm-install PACKAGE@VERSION into $agents unless its own
# marker (.installed-BIN) already names that version and the binary is there.
install_agent() {
    local want="$1@$2" marker="$agents/.installed-$3"
    local have
    have=$(cat "$marker" 2>/dev/null || true)
    if [ "$have" != "$want" ] || [ ! -x "$agents/node_modules/.bin/$3" ]; then
        echo "setup: installing $want into $agents (npm)"
        # --loglevel=error, not --silent: deprecation notices are noise, a failure is not
        npm install --prefix "$agents" --no-audit --no-fund --no-update-notifier \
            --loglevel=error --save-exact "$want"
        echo "$want" > "$marker"
    fi
}
install_agent @openai/codex "$CODEX_NPM_VERSION" codex
# Claude Code ships its native binary in a platform optional dependency
# (@anthropic-ai/claude-code-linux-x64, ...): --omit=optional would leave no binary.
install_agent @anthropic-ai/claude-code "$CLAUDE_NPM_VERSION" claude
# OpenCode's launcher picks its native binary from a platform optional dependency
# (opencode-linux-x64, ...), as Claude Code does.
install_agent opencode-ai "$OPENCODE_NPM_VERSION" opencode
# codex-acp ships its native binary in @zed-industries/codex-acp-linux-x64 (optional dep)
install_agent @zed-industries/codex-acp "$CODEX_ACP_NPM_VERSION" codex-acp
# debian_package PACKAGE WHY: apt-get install PACKAGE when we may (root, Debian), else say
# WHY it is wanted; called only when what it provides is missing.
debian_package() {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
    else
        echo "setup: $1 is missing (apt-get install $1 as root); $2" >&2
    fi
}
# codex-acp runs approved commands in Codex's Linux sandbox, which needs Debian's bubblewrap
# (without it an approved command fails: "Process exited with code 101").
command -v bwrap >/dev/null || debian_package bubblewrap "codex-acp's approved commands need it"
# The console's browser tests drive Debian's chromium (never a browser build of Playwright's
# own: `playwright install` downloads one).
[ -x /usr/bin/chromium ] || debian_package chromium "the console's browser tests need it"
# `agent-gateway service`'s unit is checked with systemd-analyze verify (tests/
# test_service_unit.py); nothing runs systemd here.
command -v systemd-analyze >/dev/null ||
    debian_package systemd "the service unit's test needs systemd-analyze"
# The ledger's PostgreSQL tests and bench start a throwaway cluster of their own (initdb and
# pg_ctl from /usr/lib/postgresql/*/bin, tests/pg_cluster.py); the package's own cluster
# service is not used, and is stopped again if installing it started one.
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null; then
    debian_package postgresql "the ledger's PostgreSQL tests need it"
    if command -v pg_ctlcluster >/dev/null; then
        for cluster in /etc/postgresql/*/*/; do
            [ -d "$cluster" ] || continue
            version=$(basename "$(dirname "$cluster")")
            pg_ctlcluster "$version" "$(basename "$cluster")" stop 2>/dev/null || true
        done
    fi
fi
echo "agent-gateway set up: .venv, codex $("$agents/node_modules/.bin/codex" --version)," \
    "claude $("$agents/node_modules/.bin/claude" --version)," \
    "opencode $("$agents/node_modules/.bin/opencode" --version)"
