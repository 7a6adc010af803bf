"""The emergence benchmark as a script: the same as `village eval` (docs/emergence.md).

    python bench/emergence.py --policy scripted --seeds 32 --json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from village.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
