"""Scripted agent that starts a grandchild in its own process group and prints its pid.

The grandchild sleeps and keeps the inherited stdout/stderr pipes (unless --quiet-child).
With --exit the agent then exits at once, leaving the grandchild behind; otherwise it stays
and ignores stdin, so that it has to be stopped with a signal.
"""

import subprocess
import sys
import time

quiet = "--quiet-child" in sys.argv
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL if quiet else None,
    stderr=subprocess.DEVNULL if quiet else None,
)
sys.stdout.write(f"{child.pid}\n")
sys.stdout.flush()
if "--exit" in sys.argv:
    sys.exit(0)
while True:
    time.sleep(600)
