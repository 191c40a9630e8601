"""Lineage queries: RQ, CCProv, CSProv and auto (DESIGN §5)."""
