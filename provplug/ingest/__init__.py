"""Getting provenance into a store: the capture API and its recorder, the run
transaction observed by hooks, row lineage, run context, script capture and
the importer."""
