"""``python -m pytest_kafka_mirror.replicators.reference``: the reference mirror process."""

import sys

from .process import main

sys.exit(main())
