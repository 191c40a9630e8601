"""``provplug ui STORE``: a local, read-only lineage explorer in the browser
(needs the ``ui`` extra: Starlette and uvicorn). See docs/ui.md."""
