"""Scripted agent that closes its stdin but keeps running: nobody will ever read our lines."""

import os
import sys
import time

os.close(0)
sys.stdout.write("stdin closed\n")
sys.stdout.flush()
time.sleep(600)
