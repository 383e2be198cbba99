"""`python3 -m vllm.entrypoints.openai.api_server --model M ...` (lanekit stand-in)."""
import sys

from lanekit_standin.vllm_engine import main as _main

if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:], entry="api_server"))
