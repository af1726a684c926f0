"""Scripted agent for tests/test_stdio.py: echoes every stdin line back; exits at stdin EOF."""

import sys

for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
