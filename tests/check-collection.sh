#!/usr/bin/env bash
# The collection as a user gets it: build the tarball in the checkout (after `make lint` has left
# its .ansible/ cache there, as `make test` does), check that it ships no caches, local state or
# test instruments, install it into an empty collections path, render every module's docs with
# ansible-doc, and plan both seed lanes through the FQCN playbooks from a scratch directory laid
# out like a user's repository (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
lanes=(mistral-large4-nvfp4-8x-vllm mistral-large4-nvfp4-8x-sglang)
out=.build
rm -rf "$out" && mkdir -p "$out"
ansible-galaxy collection build --force --output-path "$out" >/dev/null
tarball=$(realpath "$(ls "$out"/lanekit-serving-*.tar.gz)")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fail() { echo "collection: $*" >&2; exit 1; }

# What build_ignore in galaxy.yml must keep out of the tarball.
listing=$(tar -tzf "$tarball")
forbidden='^(\.ansible|\.collections|\.venv|\.build|\.cache|\.pytest_cache|\.sim|\.ci|\.git|reports|tests|molecule|benchmarks|changelogs/fragments|inventories/sim|inventories/sim-cpu)(/|$)|sim_cluster|standin|__pycache__|\.pyc$|^playbooks/[^/]*-[^/]*\.yml$'
if leaked=$(grep -E "$forbidden" <<<"$listing"); then
  echo "$leaked" | head -20 >&2
  fail "$tarball ships files that build_ignore in galaxy.yml should keep out (listed above)."
fi
for required in meta/runtime.yml playbooks/plan_lane.yml playbooks/deploy_lane.yml lanes/ images/ requirements-bench.txt \
    playbooks/bench_lane.yml roles/bench/files/baselines/mistral-large4-nvfp4-8x-vllm.json \
    roles/bench/files/baselines/mistral-large4-nvfp4-8x-sglang.json; do
  grep -qx "$required" <<<"$listing" || fail "$tarball lacks $required."
done

collections="$scratch/collections"
repo="$scratch/repo"
mkdir -p "$collections" "$repo/inventories"
modules=$(cd plugins/modules && ls *.py | sed 's/\.py$//')
# Outside the checkout, so neither its ansible.cfg nor its .collections link is in play.
(
  cd "$scratch"
  export -n ANSIBLE_CONFIG; unset ANSIBLE_CONFIG
  export ANSIBLE_COLLECTIONS_PATH="$collections" ANSIBLE_NOCOLOR=1
  ansible-galaxy collection install --offline --force -p "$collections" "$tarball" >/dev/null
  for module in $modules; do
    doc=$(ansible-doc "lanekit.serving.$module" 2>&1) || true
    if ! grep -q "^> MODULE lanekit.serving.$module" <<<"$doc"; then
      echo "$doc" | head -20 >&2
      fail "ansible-doc cannot render lanekit.serving.$module from the installed tarball."
    fi
  done
)

# A user's repository: the example ansible.cfg and requirements.yml, their own inventory. The lanes
# and image specs come from the installed collection (the repository has no lanes/ or images/).
cp "$checkout"/docs/examples/user-repo/{ansible.cfg,requirements.yml} "$repo/"
cp -r "$checkout/inventories/spark8" "$repo/inventories/spark8"
installed="$collections/ansible_collections/lanekit/serving"
before=$(cd "$installed" && find . | sort)
(
  cd "$repo"
  export -n ANSIBLE_CONFIG; unset ANSIBLE_CONFIG
  export ANSIBLE_COLLECTIONS_PATH="$collections" ANSIBLE_NOCOLOR=1
  for lane in "${lanes[@]}"; do
    log="$scratch/plan-$lane.log"
    if ! ansible-playbook lanekit.serving.plan_lane -i inventories/spark8 -e "lane=$lane" \
        -e "lanekit_reports_dir=$repo/reports" >"$log" 2>&1; then
      tail -30 "$log" >&2
      fail "ansible-playbook lanekit.serving.plan_lane -e lane=$lane fails from the installed collection."
    fi
    [ -s "$repo/reports/$lane/plan.json" ] \
      || fail "planning $lane from the installed collection wrote no $repo/reports/$lane/plan.json."
  done
  # A recipe by name from the collection's recipes/: recipe_lane writes the lane into ./lanes and its image
  # spec into ./images, and the next plan reads both (the gb300 example inventory has one tray).
  cp -r "$checkout/inventories/gb300" inventories/gb300
  log="$scratch/recipe.log"
  if ! ansible-playbook lanekit.serving.recipe_lane -e recipe=mistralai/Mistral-Large-4-1T-A52B \
      -e recipe_hardware=gb300 -e recipe_strategy=single_node_tp >"$log" 2>&1; then
    tail -30 "$log" >&2
    fail "ansible-playbook lanekit.serving.recipe_lane -e recipe=mistralai/Mistral-Large-4-1T-A52B fails from the installed collection."
  fi
  grep -q -- "--tensor-parallel-size 4" "$log" || fail "recipe_lane printed no composed command ($log)."
  recipe_lane=mistral-large-4-1t-a52b-default-gb300-single-node-tp
  [ -s "lanes/$recipe_lane.yml" ] && [ -s images/mistral-large-4-1t-a52b-vllm/image.yml ] \
    || fail "recipe_lane wrote no lanes/$recipe_lane.yml with its images/mistral-large-4-1t-a52b-vllm/image.yml."
  if ! ansible-playbook lanekit.serving.plan_lane -i inventories/gb300 -e "lane=$recipe_lane" \
      -e "lanekit_reports_dir=$repo/reports" >"$log" 2>&1; then
    tail -30 "$log" >&2
    fail "the lane recipe_lane wrote does not plan from the installed collection."
  fi
  # pin in check mode (docs/install.md), offline: the registry is a skopeo on PATH that prints a manifest
  # list, the Hub a local HTTP server answering the model-info request. It must show the new digests and
  # revision and write nothing.
  mkdir -p "$scratch/bin" "$scratch/hub/api/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4/revision"
  cat >"$scratch/bin/skopeo" <<'SKOPEO'
#!/bin/sh
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aaaa000000000000000000000000000000000000000000000000000000000001","size":1,"platform":{"architecture":"arm64","os":"linux"}},
{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aaaa000000000000000000000000000000000000000000000000000000000002","size":1,"platform":{"architecture":"amd64","os":"linux"}}]}'
SKOPEO
  chmod +x "$scratch/bin/skopeo"
  printf '{"id":"mistralai/Mistral-Large-4-1T-A52B-NVFP4","sha":"%s"}' "0123456789abcdef0123456789abcdef01234567" \
    >"$scratch/hub/api/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4/revision/main"
  python3 -m http.server 0 --bind 127.0.0.1 --directory "$scratch/hub" >"$scratch/hub.log" 2>&1 &
  hub_pid=$!
  for _ in $(seq 50); do grep -q 'Serving HTTP' "$scratch/hub.log" && break; sleep 0.1; done
  hub_port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$scratch/hub.log" | head -1)
  sums_before=$(sha256sum "lanes/$recipe_lane.yml" images/mistral-large-4-1t-a52b-vllm/image.yml)
  log="$scratch/pin.log"
  if ! PATH="$scratch/bin:$PATH" HF_ENDPOINT="http://127.0.0.1:$hub_port" ansible-playbook lanekit.serving.pin \
      -e "lane=$recipe_lane" -e pin_resolver=skopeo --check --diff >"$log" 2>&1; then
    kill "$hub_pid"; tail -30 "$log" >&2
    fail "ansible-playbook lanekit.serving.pin -e lane=$recipe_lane --check --diff fails from the installed collection."
  fi
  kill "$hub_pid"
  grep -q "sha256:aaaa000000000000000000000000000000000000000000000000000000000001" "$log" \
    && grep -q "0123456789abcdef0123456789abcdef01234567" "$log" && grep -q "pinned arm64, the architecture of the lane" "$log" \
    || fail "pin --check --diff did not show the new digest and revision ($log)."
  [ "$sums_before" = "$(sha256sum "lanes/$recipe_lane.yml" images/mistral-large-4-1t-a52b-vllm/image.yml)" ] \
    || fail "pin --check wrote to lanes/$recipe_lane.yml or its image spec."
)
# Reports and plans belong to the user's repository, never inside the installed collection.
after=$(cd "$installed" && find . | sort)
if [ "$before" != "$after" ]; then
  diff <(echo "$before") <(echo "$after") | head -20 >&2
  fail "planning wrote into the installed collection $installed (listed above)."
fi

count=$(echo "$modules" | wc -w)
files=$(grep -cv '/$' <<<"$listing")
echo "collection: $(basename "$tarball") ships $files files and no test instruments; installed, ansible-doc renders $count modules and lanekit.serving.plan_lane plans ${lanes[*]} and a lane recipe_lane compiled from the collection's recipes/, which pin --check --diff would pin"
