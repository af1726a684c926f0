"""Scripted agent that never answers: says "ready", then ignores stdin (and EOF) forever.

With --ignore-sigterm it also ignores SIGTERM, so that only SIGKILL ends it.
"""

import signal
import sys
import time

if "--ignore-sigterm" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
# Only now may the test stop us: the SIGTERM disposition is in place.
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    time.sleep(600)
