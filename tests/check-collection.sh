#!/usr/bin/env bash
# Build the collection tarball, install it into a scratch path and render every module's docs
# with ansible-doc: what a user installing from the tarball gets must work.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build
rm -rf "$out" && mkdir -p "$out"
ansible-galaxy collection build --force --output-path "$out" >/dev/null
tarball=$(ls "$out"/lanekit-serving-*.tar.gz)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tarball=$(realpath "$tarball")
modules=$(cd plugins/modules && ls *.py | sed 's/\.py$//')
# Outside the checkout, so neither its ansible.cfg nor its .collections link is in play.
(
  cd "$scratch"
  export -n ANSIBLE_CONFIG; unset ANSIBLE_CONFIG
  export ANSIBLE_COLLECTIONS_PATH="$scratch" ANSIBLE_NOCOLOR=1
  ansible-galaxy collection install --offline --force -p "$scratch" "$tarball" >/dev/null
  for module in $modules; do
    doc=$(ansible-doc "lanekit.serving.$module" 2>&1) || true
    if ! grep -q "^> MODULE lanekit.serving.$module" <<<"$doc"; then
      echo "collection: ansible-doc cannot render lanekit.serving.$module from the installed tarball:" >&2
      echo "$doc" | head -20 >&2
      exit 1
    fi
  done
)
count=$(echo "$modules" | wc -w)
echo "collection: $tarball builds, installs, and ansible-doc renders $count modules"
