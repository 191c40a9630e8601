"""The store: the built-in Parquet store and its transaction
(:mod:`.parquet`), reading its files (:mod:`.files`), run selection
(:mod:`.runs`), location-edge files (:mod:`.locations`) and the one scan of
every committed triple (:mod:`.triples`). The format itself (dataset names
and Arrow schemas) is the leaf module :mod:`provplug.schema`; the writers a
run's files go through are part of the plugin API (:mod:`provplug.plugin.writers`)."""
