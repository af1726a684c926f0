"""An interaction without I/O: the state machine and its record, policy, votes, the content
hash, plans, expiry and escalation planning. Imports the top and ``config/``."""
