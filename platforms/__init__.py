"""Chat platforms: one module (or package) each."""
