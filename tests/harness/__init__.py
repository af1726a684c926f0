"""A gateway in a separate process (``gateway_proc``) and the test's side of it (``driver``)."""
