"""Scripted agent: floods stderr with MEBIBYTES MiB (argv[1]) of numbered lines, then echoes.

A gateway that does not drain stderr deadlocks here: the flood blocks on a full stderr pipe
and "after-flood" never reaches stdout.
"""

import sys

mebibytes = int(sys.argv[1])
line_count = mebibytes * 1024 * 1024 // 20
for number in range(line_count):
    sys.stderr.write(f"stderr line {number:07d}\n")  # 20 bytes a line
sys.stderr.write("END-OF-FLOOD\n")
sys.stderr.flush()
sys.stdout.write("after-flood\n")
sys.stdout.flush()
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
