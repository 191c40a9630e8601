"""The lineage index: components, workflow graph, splits, connected sets (DESIGN §4)."""
