"""The recipe compiler: vLLM recipes and a choice compiled into commands and a lane file."""
