"""`python3 -m sglang.launch_server ...` (lanekit stand-in)."""
import sys

from lanekit_standin.sglang_engine import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="launch_server.py", entry="launch_server"))
