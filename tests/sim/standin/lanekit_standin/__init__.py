"""lanekit stand-in engines: TEST INSTRUMENTS, not inference engines.

They accept the command lines of vLLM and SGLang, rendezvous across nodes over TCP, read the
staged safetensors shards for real and answer the OpenAI API with fixed text that says it
comes from a stand-in. No model runs here. See ../README.md for the knobs and log formats.
"""

STANDIN_LABEL = "lanekit stand-in (test instrument, not a model)"

# Versions reported by the stand-ins. The local version segment marks them as stand-ins while
# staying parseable (PEP 440): what the report's images carry, plus "+lanekit.standin".
VLLM_VERSION = "0.1.dev23730+g64053a10b.lanekit.standin"
SGLANG_VERSION = "0.5.23+lanekit.standin"
