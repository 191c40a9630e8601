"""The store: where a store lives and how its bytes move (:mod:`.files`,
:mod:`.writers`), the built-in Parquet store and its transaction
(:mod:`.parquet`), run selection (:mod:`.runs`), location-edge files
(:mod:`.locations`) and the one scan of every committed triple
(:mod:`.triples`). The format itself (dataset names and Arrow schemas) is the
leaf module :mod:`provplug.schema`."""
