# Copyright: lanekit developers
# Apache-2.0
"""Documentation every image module shares: the docker CLI option and what the host needs.

Used with ``extends_documentation_fragment: lanekit.serving.docker_cli``; the option itself is added
to each module's argument spec once, by ``module_utils/_image/_docker_module.docker_argument_spec``.
"""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  docker_cli:
    description:
      - Path of the docker CLI on the host the module runs on; default the C(docker) on E(PATH).
    type: path
requirements:
  - The docker CLI and a running docker engine on the host the module runs on (the Docker SDK for Python is not needed).
notes:
  - Every docker command runs as an argv list (no shell); a failure is reported as one sentence naming the
    command, the host and docker's last words.
"""
