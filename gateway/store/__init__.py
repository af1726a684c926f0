"""The ledger (SQLite or PostgreSQL), its migrations, leases and rate buckets, and the audit
export. ``store.Store.open`` opens it. Imports the top, ``config/`` and ``interactions/``;
its modules import each other by their own names, never through this package."""
