"""lanekit STAND-IN for the `vllm` package (a test instrument; it runs no model).

Only what the stand-in image needs: the version and the CLI entry points
(`vllm serve ...`, `python3 -m vllm.entrypoints.openai.api_server --model ...`)."""
from lanekit_standin import VLLM_VERSION as __version__  # noqa: F401
