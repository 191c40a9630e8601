"""The kedro-starters project kept here is run by its test as a user would, not collected: its own tests
need its package installed."""

collect_ignore = ["spaceflights_pyspark"]
