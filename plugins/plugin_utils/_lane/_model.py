# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The validated lane as a type: what ``_load.load_lane`` returns and the plan builder reads.

One job: name the lane's shape for the type checker. The keys and their checks are the schema
table's (``_table.SCHEMA``); this file adds what validation fills in: the defaults, the file the
lane came from, its layers, and the engine record (``_engine``), which every reader uses instead
of looking the engine up by name again.
"""
# No ``from __future__ import annotations``: TypedDict reads NotRequired[...] from evaluated annotations.
from typing import Any, NotRequired, TypedDict

from ansible_collections.lanekit.serving.plugins.module_utils._lane._engines import Engine


class ModelSection(TypedDict):
    id: str
    served_name: str
    dir: str  # normalised by validation (model.id when the lane leaves it unset)
    layout: str
    source: dict[str, Any]
    moe: bool
    revision: NotRequired[str | None]
    size_gib: NotRequired[float | None]
    arch: NotRequired[str | None]
    attention: NotRequired[str | None]
    head_dim: NotRequired[int | None]
    quantization: NotRequired[str | None]


class TopologySection(TypedDict):
    nodes: int
    gpus_per_node: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    layout: NotRequired[str | None]
    data_parallel_local: NotRequired[int | None]
    data_parallel_rank_step: NotRequired[int | None]


class LogsSection(TypedDict, total=False):
    max_size: str  # docker's max-size (100m)
    max_files: int  # docker's max-file


class ServeSection(TypedDict):
    port: int
    rendezvous_port: int
    args: dict[str, Any]  # flag -> value (null/false drop it, true renders it bare)
    env: dict[str, Any]
    docker_args: list[str]
    entrypoint: NotRequired[list[str] | None]
    logs: NotRequired[LogsSection | None]  # each rank's docker log rotation


class BootSection(TypedDict):
    budget_s: int
    expected_load_s: int
    expected_warmup_s: int
    stall_s: int
    poll_s: int
    stability_s: int


class Lane(TypedDict):
    """One validated lane (a lane file with its layers merged, defaults filled in)."""

    lane: str
    engine: str
    image: str
    hardware: str
    model: ModelSection
    topology: TopologySection
    serve: ServeSection
    boot: BootSection
    cache: dict[str, Any]
    description: NotRequired[str | None]
    memory: NotRequired[dict[str, Any] | None]
    pd: NotRequired[dict[str, Any] | None]
    notes: NotRequired[list[str] | None]
    api: NotRequired[dict[str, Any] | None]
    bench: NotRequired[dict[str, Any] | None]
    _source: str  # the lane file
    _layers: list[str]  # the lane file and the override layers that set anything, in order
    _engine: Engine  # the engine record of ``engine``, looked up once by validation
