#!/usr/bin/env bash
# Run `ansible-test sanity` on this checkout.
#
# ansible-test only runs from inside .../ansible_collections/<namespace>/<name>/, and it compares
# os.getcwd() with that layout, so a symlink (like the .collections link `make venv` makes) is not
# enough: the collection's files are copied into a scratch tree laid out that way. Only files git
# would ship are copied (tracked, plus untracked ones not ignored), never .venv, caches or reports.
#
# Each sanity test runs in a virtualenv ansible-test creates under ~/.ansible/test/venv with the
# versions pinned by ansible-core itself (ansible_test/_data/requirements/sanity.*.txt), so pinning
# ansible-core in requirements.txt pins the linters too. The first run downloads them from PyPI
# (about a minute); later runs reuse them.
#
# Usage: tests/sanity.sh [ansible-test sanity options, e.g. --test pylint; they replace the default]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=${VENV_BIN:-$root/.venv/bin}

# Every sanity test ansible-test has for a collection runs, except shellcheck: it needs the
# shellcheck program, which our build machines do not install, and a test that runs or not depending
# on the machine is worse than none. The ones that matter most here: validate-modules (DOCUMENTATION
# against argument_spec), ansible-doc, pylint and pep8 (ansible-test's own configuration), compile,
# import (each module and module_util imported in a bare venv), yamllint, shebang, runtime-metadata,
# changelog and ignores (the ignore file itself).
skip_tests=(shellcheck)

read -r namespace name < <("$bin/python" - <<'EOF'
import yaml
with open("galaxy.yml", encoding="utf-8") as handle:
    meta = yaml.safe_load(handle)
print(meta["namespace"], meta["name"])
EOF
)
python_version=$("$bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

# ansible-test bootstraps pip in its venvs with a script from ci-files.testing.ansible.com, which is
# unreachable from our build machines; it uses a cached copy when there is one, so offer ours. The pip
# version comes from ansible-test's internals: if they move, skip this and let ansible-test download.
pip_version=$("$bin/python" - "$python_version" 2>/dev/null <<'EOF' || true
import sys
from types import SimpleNamespace
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(SimpleNamespace(version=sys.argv[1]))["pip"])
EOF
)
get_pip=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [[ -n $pip_version && ! -e $get_pip ]]; then
  mkdir -p "$(dirname "$get_pip")"
  cp tests/sanity/get_pip.py "$get_pip"
  echo "sanity: ansible-test will bootstrap pip $pip_version with tests/sanity/get_pip.py ($get_pip)"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dest=$scratch/ansible_collections/$namespace/$name
mkdir -p "$dest"
# --cached lists files deleted in the work tree but not yet in the index: copy only what exists.
# A .venv that is a symlink (as in a git worktree sharing one venv) slips past .gitignore's ".venv/".
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' path; do
      if [[ $path != .venv ]] && [[ -e $path || -L $path ]]; then printf '%s\0' "$path"; fi
    done \
  | tar --null --files-from=- --create --file=- \
  | tar --extract --file=- --directory="$dest"

cd "$dest"
# The checkout's ansible.cfg points collections_path at the checkout; ansible-test sets its own.
unset ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS
export PATH="$bin:$PATH"

if [[ $# -gt 0 ]]; then
  selected=("$@")
else
  selected=()
  for test in "${skip_tests[@]}"; do selected+=(--skip-test "$test"); done
fi
start=$SECONDS
"$bin/ansible-test" sanity --color no --python "$python_version" "${selected[@]}"
echo "sanity: ansible-test sanity passed on Python $python_version in $((SECONDS - start)) s"
