"""Scripted agent: prints its whole environment as one JSON line, then exits."""

import json
import os
import sys

sys.stdout.write(json.dumps(dict(os.environ)) + "\n")
sys.stdout.flush()
