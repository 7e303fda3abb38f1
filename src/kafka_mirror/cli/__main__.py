"""``python -m kafka_mirror.cli``: the ``kafka-mirror`` command."""

import sys

from kafka_mirror.cli.main import main

sys.exit(main())
