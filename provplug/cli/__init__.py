"""The ``provplug`` command line: :mod:`provplug.cli.main` parses and
dispatches (the console script is ``provplug.cli.main:main``); one module per
command or command group registers its parser and runs it. Nothing outside
this package imports it."""
