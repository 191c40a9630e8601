import sys

from provplug.cli.main import main

sys.exit(main())
