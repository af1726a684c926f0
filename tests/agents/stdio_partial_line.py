"""Scripted agent: writes a full line, then a last line with no newline, then exits."""

import sys

sys.stdout.buffer.write(b"first\nlast-without-newline")
sys.stdout.buffer.flush()
