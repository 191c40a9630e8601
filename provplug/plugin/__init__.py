"""Everything a plugin author reads: the markers, the hook specifications, the
protocols between provplug and its plugins, the writers a run's files go
through, and the plugin manager wrapper."""
