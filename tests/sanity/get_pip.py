"""Offline stand-in for the pip bootstrap script ansible-test downloads into new sanity venvs.

ansible-test creates each sanity test's virtualenv without pip and fetches get-pip.py from
ci-files.testing.ansible.com, a host our build machines cannot reach (PyPI they can). This script
takes the same command line (pip options, then ``pip==X`` and ``--no-setuptools``/``--no-wheel``):
it installs the interpreter's bundled pip with ensurepip, then the requested packages from the
configured index. tests/sanity.sh puts it where ansible-test looks for its cached copy.
"""

from __future__ import annotations

import ensurepip
import importlib.util
import os
import subprocess
import sys

# get-pip.py's own flags: not pip options, they say what to leave out.
SKIP_FLAGS = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}


def main() -> None:
    """Install pip into the running interpreter, then what the command line asks for."""
    args = [arg for arg in sys.argv[1:] if arg not in SKIP_FLAGS]
    left_out = [package for flag, package in SKIP_FLAGS.items() if flag in sys.argv[1:]]
    # ensurepip points PIP_CONFIG_FILE at /dev/null for good; pip needs the machine's index and CA.
    environ = dict(os.environ)
    ensurepip.bootstrap()
    subprocess.run([sys.executable, "-m", "pip", "install", *args], check=True, env=environ)
    # Python 3.11's ensurepip also installs setuptools; get-pip.py would not have.
    unwanted = [package for package in left_out if importlib.util.find_spec(package) is not None]
    if unwanted:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *unwanted], check=True, env=environ)


if __name__ == "__main__":
    main()
