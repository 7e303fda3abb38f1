"""``python -m mirror_bench`` (from ``bench/``): the benchmark's command line."""

import sys

from .cli import main

sys.exit(main())
