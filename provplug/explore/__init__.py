"""Exploring and managing a store: ``provplug runs``, ``tables``, ``show``,
``delete-run`` and ``gc`` (:mod:`.cli`), with the Python API's
``runs()``/``tables()``/``show()`` (:mod:`.browse`) and run selection
(:mod:`.runs`). Nothing heavy is imported here."""
