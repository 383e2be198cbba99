"""lanekit STAND-IN for the `sglang` package (a test instrument; it runs no model).

Entry points: `sglang serve ...` (sglang.cli.main), `python3 -m sglang.launch_server ...`.
The module sglang/srt/model_executor/model_runner_components/load_model_utils.py carries the
real post-load barrier constant so build-time patches can be applied to it."""
from lanekit_standin import SGLANG_VERSION as __version__  # noqa: F401
