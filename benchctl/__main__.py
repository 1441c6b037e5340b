import sys

from benchctl.cli import main

sys.exit(main())
