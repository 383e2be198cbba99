"""`sglang` console script (lanekit stand-in): `sglang serve [MODEL] [flags]`, `sglang version`."""
import sys

from lanekit_standin import SGLANG_VERSION
from lanekit_standin.sglang_engine import main as _serve

USAGE = "usage: sglang [-h] {serve,version} ...\n"


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\nlanekit STAND-IN for the SGLang CLI (test instrument).\n")
        sys.exit(0 if argv else 2)
    if argv[0] in ("version", "--version", "-v"):
        print(SGLANG_VERSION, flush=True)
        sys.exit(0)
    if argv[0] != "serve":
        sys.stderr.write(USAGE + f"sglang: error: argument command: invalid choice: '{argv[0]}' "
                         "(choose from 'serve', 'version')\n")
        sys.exit(2)
    sys.exit(_serve(argv[1:], prog="sglang serve", entry="serve"))


if __name__ == "__main__":
    main()
