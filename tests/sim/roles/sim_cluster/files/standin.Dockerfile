# Stand-in "upstream" engine image of the lanekit simulated cluster (a test instrument).
# Built from tests/sim/standin (the build context) on the local debootstrap base image, pushed
# to the sim registry under the real repository name and tag. It serves no model.
ARG LKSIM_BASE_IMAGE
FROM ${LKSIM_BASE_IMAGE}
ARG LKSIM_ENGINE
LABEL lanekit.sim="test-instrument" \
      lanekit.sim.engine="${LKSIM_ENGINE}" \
      org.opencontainers.image.description="TEST INSTRUMENT: stand-in engine, serves no model"
# The ranks of one node share its simulated device (memory.py): a second lane's engine on a node
# finds its memory claimed, as on a GB10. Unit tests run the stand-ins without it.
ENV STANDIN_DEVICE_CLAIMS=1
COPY . /standin
RUN /standin/install.sh "${LKSIM_ENGINE}"
