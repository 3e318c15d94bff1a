import sys

from fieldkit.cli import main

sys.exit(main())
