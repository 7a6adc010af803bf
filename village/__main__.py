import sys

from village.cli import main

sys.exit(main())
