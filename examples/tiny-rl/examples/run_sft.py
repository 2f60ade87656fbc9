"""SFT on the toy task: `uv run examples/run_sft.py [--config FILE] [OVERRIDES...]`."""

import sys
from pathlib import Path

from tiny_rl.sft import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], Path(__file__).parent / "configs" / "sft_tiny.yaml"))
