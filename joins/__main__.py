import sys

from joins.cli import main

sys.exit(main())
