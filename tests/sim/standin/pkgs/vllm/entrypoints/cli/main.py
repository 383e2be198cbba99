"""`vllm` console script (lanekit stand-in)."""
import sys

from lanekit_standin.vllm_engine import main as _main


def main() -> None:
    sys.exit(_main(sys.argv[1:], entry="cli"))


if __name__ == "__main__":
    main()
