"""Scripted agent: dies before its first reply, saying why on stderr (exit code 3)."""

import sys

sys.stderr.write("starting agent\n")
sys.stderr.write("fatal: no configuration found in /nowhere\n")
sys.exit(3)
