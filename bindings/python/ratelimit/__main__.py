"""python -m ratelimit: the ratelimit command line tool (ratelimit.cli)."""
import sys

from ratelimit.cli import main

sys.exit(main())
