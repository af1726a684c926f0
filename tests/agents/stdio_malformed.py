"""Scripted agent: writes a line that is neither JSON nor UTF-8, then a valid one, then exits."""

import sys

sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "method": \xff\xfe broken\n')
sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "method": "ok"}\n')
sys.stdout.buffer.flush()
