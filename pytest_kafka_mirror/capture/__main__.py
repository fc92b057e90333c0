import sys

from .target import main

sys.exit(main())
