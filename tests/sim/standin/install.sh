#!/bin/sh
# Install a lanekit stand-in engine into an image. The stand-ins are TEST INSTRUMENTS: they take
# the real engines' command lines, rendezvous, read the weights and answer the OpenAI API with
# fixed text; they run no model. Only python3 (stdlib) is needed.
#
#   COPY tests/sim/standin /standin
#   RUN /standin/install.sh vllm     # /usr/local/bin/vllm; python packages lanekit_standin, vllm
#   RUN /standin/install.sh sglang   # /usr/local/bin/sglang, /opt/nvidia/nvidia_entrypoint.sh;
#                                    # python packages lanekit_standin, sglang (python3 -m
#                                    # sglang.launch_server works; load_model_utils.py carries
#                                    # UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480 for patches)
#
# Packages go to the interpreter's first site directory (Debian bookworm:
# /usr/local/lib/python3.11/dist-packages). DESTDIR prefixes every installed path (tests);
# PYTHON names the interpreter (default: python3 on PATH). Re-running replaces the files.
set -eu

engine="${1:-}"
case "$engine" in
  vllm|sglang) ;;
  *) echo "usage: $0 <vllm|sglang>" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
py="${PYTHON:-$(command -v python3 || true)}"
if [ -z "$py" ]; then
  echo "install.sh: python3 not found (the stand-ins need python3 in the image)" >&2
  exit 1
fi
site=$("$py" -c 'import site, sysconfig
dirs = site.getsitepackages() if hasattr(site, "getsitepackages") else []
print(dirs[0] if dirs else sysconfig.get_paths()["purelib"])')
dest="${DESTDIR:-}"

copy_pkg() {  # copy_pkg SRC NAME
  rm -rf "$dest$site/$2"
  cp -R "$1" "$dest$site/$2"
  find "$dest$site/$2" -name __pycache__ -type d -prune -exec rm -rf {} +
  find "$dest$site/$2" -type f -exec chmod 0644 {} +
}

write_entry() {  # write_entry PATH MODULE
  mkdir -p "$(dirname "$1")"
  cat > "$1" <<EOF
#!$py
# lanekit stand-in entry point for $engine: a test instrument, not the real engine.
import sys
from $2 import main
sys.exit(main())
EOF
  chmod 0755 "$1"
}

write_dist_info() {  # write_dist_info NAME VERSION
  info="$dest$site/$1-$2.dist-info"
  rm -rf "$dest$site/$1"-*.dist-info
  mkdir -p "$info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: lanekit stand-in for %s (test instrument, runs no model)\n' \
    "$1" "$2" "$1" > "$info/METADATA"
  printf 'lanekit-standin\n' > "$info/INSTALLER"
  : > "$info/RECORD"
}

mkdir -p "$dest$site"
copy_pkg "$here/lanekit_standin" lanekit_standin
copy_pkg "$here/pkgs/$engine" "$engine"

case "$engine" in
  vllm)
    write_entry "$dest/usr/local/bin/vllm" vllm.entrypoints.cli.main
    # The P/D router of vLLM's recipes (a separate program upstream, in the same image here).
    write_entry "$dest/usr/local/bin/vllm-router" lanekit_standin.router
    write_dist_info vllm "0.1.dev23730+g64053a10b.lanekit.standin"
    ;;
  sglang)
    write_entry "$dest/usr/local/bin/sglang" sglang.cli.main
    write_dist_info sglang "0.5.23+lanekit.standin"
    mkdir -p "$dest/opt/nvidia"
    cat > "$dest/opt/nvidia/nvidia_entrypoint.sh" <<'EOF'
#!/bin/sh
# lanekit STAND-IN for NVIDIA's container entrypoint: print the banner, then run the command.
cat <<'BANNER'

==========
== SGLang ==
==========
lanekit stand-in image: a test instrument; it runs no model and has no GPU code.

BANNER
if [ "$#" -eq 0 ]; then
  if [ -x /bin/bash ]; then exec /bin/bash; fi
  exec /bin/sh
fi
exec "$@"
EOF
    chmod 0755 "$dest/opt/nvidia/nvidia_entrypoint.sh"
    ;;
esac

mkdir -p "$dest/etc"
printf 'engine=%s\nlabel=lanekit stand-in (test instrument, not a model)\nsite=%s\n' "$engine" "$site" \
  > "$dest/etc/lanekit-standin"

# prove the entry point runs (only for a real install: DESTDIR paths are not on sys.path)
if [ -z "$dest" ]; then
  if [ "$engine" = vllm ]; then
    /usr/local/bin/vllm --version >/dev/null
  else
    /usr/local/bin/sglang version >/dev/null
    "$py" -c 'import sglang.srt.model_executor.model_runner_components.load_model_utils as m; assert m.UNBALANCED_MODEL_LOADING_TIMEOUT_S'
  fi
fi
echo "lanekit stand-in $engine installed (site packages: $site)"
