"""Scripted agent: writes one line of MEBIBYTES MiB (argv[1]) in pieces, then stays silent."""

import sys
import time

mebibytes = int(sys.argv[1])
piece = b"x" * (1024 * 1024)
for _ in range(mebibytes):
    sys.stdout.buffer.write(piece)  # blocks once the reader stops reading: that is the point
sys.stdout.buffer.write(b"\n")
sys.stdout.buffer.flush()
time.sleep(600)
