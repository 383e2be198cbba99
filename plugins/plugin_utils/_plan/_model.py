# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The plan's shape as types: every key of ``plan.json`` (fact ``lanekit_plan``), its type and meaning.

One job: the plan's interface. The plan is JSON read by roles, modules and people, so its parts
are TypedDicts (the JSON shape stays the interface); each key carries its one-line meaning in
``Annotated[..., "meaning"]``, and ``tests/tools/references.py`` renders docs/contracts.md's key
table from these classes. ``_build.build_plan`` is the one function that fills them.

``PLAN_VERSION`` names the shape and the hashing rules. It is part of every rank's hashed spec,
so a new version moves every ``spec_hash`` and ``plan_hash`` once, on purpose, and nothing else
does without a rank's settings changing. Bump it with any change to what is hashed.
"""
# No ``from __future__ import annotations`` here: TypedDict reads NotRequired[...] from evaluated
# annotations only (Python 3.11), and the required/optional split is part of the interface.
from typing import Annotated, Any, NotRequired, TypedDict

# 1: the unversioned plans up to the domain layout. 2: plan_version published and hashed, every
# rank's pool keys and group_add/security_opt hashed on every layout, api.url, image.pin, and
# bench/hardware_profile keys published on every lane. 3: every rank's docker log is rotated
# (log_driver, log_opts: serve.logs), hashed.
PLAN_VERSION = 3


class Mount(TypedDict):
    source: Annotated[str, "the host path (the weights root)"]
    target: Annotated[str, "the same path in the container"]
    read_only: Annotated[bool, "always true: ranks never write the weights"]


class RankSpec(TypedDict):
    host: Annotated[str, "the inventory host that runs this rank"]
    node_rank: Annotated[int, "the rank's index in the lane (0 is the head)"]
    role: Annotated[str, "head, worker, prefill-head, prefill-worker, decode-head, decode-worker or router"]
    pool: Annotated[str, "the rank's group: lane (tp and dp layouts), prefill, decode or router"]
    pool_rank: Annotated[int, "the rank's index inside its pool"]
    serves_api: Annotated[bool, "whether this rank answers the lane's API (the head, or a P/D lane's router)"]
    container_name: Annotated[str, "lanekit-<lane>-r<rank>"]
    image: Annotated[str, "the image reference the rank runs (image.ref)"]
    entrypoint: Annotated[list[str], "the container's entrypoint (the program)"]
    command: Annotated[list[str], "the program's arguments, this rank's engine argv included"]
    env: Annotated[dict[str, str], "the rank's environment, values as text (never a secret's value)"]
    mounts: Annotated[list[Mount], "bind mounts (the weights root, read-only, on model ranks)"]
    network_mode: Annotated[str, "host: ranks talk over the fabric addresses"]
    ipc_mode: Annotated[str, "host: NCCL's shared memory"]
    gpus: Annotated[str, "docker's --gpus value ('' for none)"]
    devices: Annotated[list[str], "docker --device entries"]
    group_add: Annotated[list[str], "docker --group-add entries (AMD ranks: video)"]
    security_opt: Annotated[list[str], "docker --security-opt entries"]
    cap_add: Annotated[list[str], "docker --cap-add entries"]
    ulimits: Annotated[list[str], "docker --ulimit entries (name=soft:hard)"]
    shm_size: Annotated[str, "docker --shm-size ('' for docker's default)"]
    log_driver: Annotated[str, "docker --log-driver: json-file, which rotates and which docker logs reads"]
    log_opts: Annotated[dict[str, str], "docker --log-opt entries: max-size and max-file (serve.logs)"]
    extra_docker_args: Annotated[list[str], "the lane's serve.docker_args, appended to docker run"]
    fabric_ip: Annotated[str | None, "the host's fabric address"]
    api_port: Annotated[int, "the port of the API this rank belongs to (its pool's port in a P/D lane)"]
    health_port: Annotated[int | None, "the port this rank answers /health on, null when it serves no HTTP"]
    spec_hash: Annotated[str, "sha256 of the hashed spec (plan_version, image, argv, env, mounts, docker options)"]
    labels: Annotated[dict[str, str], "io.lanekit.* labels: lane, rank, role, spec-hash, plan-hash, image, weights"]
    docker_argv: Annotated[list[str], "the paste-able docker run of this rank"]
    container: Annotated[dict[str, Any], "the rank as community.docker.docker_container options"]
    secret_env_file: NotRequired[Annotated[str, "the node's root-only env file (only with secrets)"]]
    secret_env_names: NotRequired[Annotated[list[str], "the variables the env file sets (only with secrets)"]]


class ImagePin(TypedDict):
    ref: Annotated[str, "the image reference every node must hold"]
    content_hash: Annotated[str, "the content hash every node's image must carry in its label"]
    rootfs: Annotated[str, "the locked image's rootfs digest for this architecture ('' without a lock entry)"]
    config: Annotated[str, "the locked image's config digest for this architecture ('' without a lock entry)"]


class ImageSpec(TypedDict):
    name: Annotated[str, "the directory under images/"]
    ref: Annotated[str, "the image reference ranks run (repository:tag from the content hash)"]
    content_hash: Annotated[str, "sha256 of the image spec, its patches and the pinned base"]
    base_ref: Annotated[str, "the base image, by digest"]
    base_digest: Annotated[str | None, "the base image's digest for this architecture"]
    arch: Annotated[str, "the nodes' architecture (lanekit_node_arch)"]
    platform: Annotated[str, "docker's platform string"]
    pinned: Annotated[bool, "whether the base is pinned by a full digest"]
    pin_problem: Annotated[str | None, "why the base is not pinned, as a sentence"]
    spec_dir: Annotated[str, "the image's directory on the controller"]
    entrypoint: Annotated[list[str], "the image's entrypoint"]
    patches: Annotated[list[dict[str, Any]], "the patch files baked into the image (file, sha256, mode)"]
    labels: Annotated[dict[str, str], "labels the image spec sets"]
    repository: Annotated[str, "the repository part of ref"]
    tag: Annotated[str | None, "the base image's tag (shown, never pulled)"]
    pin: Annotated[ImagePin, "what every node's image must match (roles/image reads it)"]


class WeightsSpec(TypedDict):
    root: Annotated[str, "lanekit_weights_root: where every node mounts the weights"]
    path: Annotated[str, "the revision directory the engines read"]
    dir: Annotated[str, "the model's directory under the root"]
    model_id: Annotated[str, "the model's id (model.id)"]
    revision: Annotated[str | None, "the pinned commit, null when unpinned"]
    layout: Annotated[str | None, "hf or mistral_consolidated"]
    source: Annotated[dict[str, Any] | None, "where staging reads the model from (model.source)"]
    size_gib: Annotated[float | None, "the model's size, for the page-cache budget"]


class ApiSpec(TypedDict):
    host: Annotated[str, "the inventory host of the rank that serves the API"]
    address: Annotated[str, "the address clients and probes use (api.bind, else that host's fabric_ip)"]
    port: Annotated[int, "the lane's API port (serve.port)"]
    url: Annotated[str, "http://address:port, an IPv6 address in brackets"]
    served_model_name: Annotated[str, "the model name requests use (model.served_name)"]
    key_required: Annotated[bool, "whether requests need lanekit_api_key"]


class PoolSpec(TypedDict):
    ranks: Annotated[list[int], "the pool's node ranks"]
    port: Annotated[int, "the port the pool (or the router) serves"]
    parallelism: NotRequired[Annotated[str, "tp, tep or dep (prefill and decode pools)"]]


class SecretsRecord(TypedDict):
    api_key: Annotated[bool, "whether lanekit_api_key is set (never its value)"]
    api_key_env: Annotated[str, "the variable the key reaches the engine as"]
    env_names: Annotated[list[str], "the names lanekit_secret_env sets"]
    env_file: Annotated[str, "the node's root-only env file"]
    hash: Annotated[str, "a salted hash of the values: a changed secret recreates the ranks"]


class HardwareSummary(TypedDict):
    display_name: Annotated[str, "the profile's name for people"]
    gpu_name: Annotated[str | None, "the GPU a node must show (null on CPU nodes)"]
    compute_capability: Annotated[str | None, "the NVIDIA compute capability a node must show"]
    device_memory_gib: Annotated[float | None, "device memory per GPU"]
    admission_free_gib: Annotated[float | None, "the most device memory a rank may claim (the admission ceiling)"]
    unified_memory: Annotated[bool, "whether GPU and CPU share memory (the page-cache budget)"]
    vendor: Annotated[str | None, "nvidia, amd, google, intel, huawei or cpu"]
    gfx_arch: Annotated[str | None, "the AMD gfx target a node must show"]
    gpus_per_node: Annotated[int | None, "GPUs per node"]
    memory_model: Annotated[str | None, "how the cache role budgets memory (null: auto)"]
    arch: Annotated[str | None, "the CPU architecture the profile fixes (null: any)"]
    recognition: NotRequired[Annotated[dict[str, Any], "how node_facts recognises the node's kind (profiles with one)"]]


class LintSummary(TypedDict):
    warnings: Annotated[list[dict[str, Any]], "lint warnings ({id, message})"]
    skipped: Annotated[list[str], "rules skipped with lint_skip"]


class OverrideLayer(TypedDict):
    layer: Annotated[str, "the layer's source"]
    hosts: Annotated[list[str], "the hosts it applies to"]
    keys: Annotated[dict[str, Any], "what it set, as dotted key -> value"]


class Plan(TypedDict):
    plan_version: Annotated[int, "the plan's shape and hashing rules (PLAN_VERSION)"]
    lane: Annotated[str, "the lane's name"]
    engine: Annotated[str, "vllm or sglang"]
    plan_hash: Annotated[str, "sha256 of the ranks' spec hashes: changes when any rank's spec changes"]
    hardware: Annotated[str, "the hardware profile's id"]
    hardware_profile: Annotated[HardwareSummary, "the profile's facts the node check and the cache role read"]
    topology: Annotated[dict[str, Any], "the lane's topology, defaults filled in"]
    image: Annotated[ImageSpec, "the resolved image"]
    weights: Annotated[WeightsSpec, "where the weights are and which revision ranks read"]
    api: Annotated[ApiSpec, "where the lane's API answers"]
    boot: Annotated[dict[str, Any], "the lane's boot budget and expectations"]
    cache: Annotated[dict[str, Any], "the page-cache settings (warm, headroom_gib)"]
    bench: Annotated[dict[str, Any], "the lane's bench settings ({} when it has none)"]
    rendezvous_port: Annotated[int | None, "the port the ranks meet at (null for one node and for P/D lanes)"]
    barrier_timeout_s: Annotated[float | None, "the engine's post-load barrier timeout, null when it has none"]
    reports_dir: Annotated[str | None, "<reports root>/<lane> on the controller"]
    hosts: Annotated[dict[str, list[int]], "host -> its node ranks (\"my ranks\")"]
    start_order: Annotated[list[list[int]], "batches of node ranks to start, in order"]
    stop_order: Annotated[list[list[int]], "batches of node ranks to stop, in order"]
    ranks: Annotated[list[RankSpec], "one container spec per rank, in rank order"]
    memory: Annotated[dict[str, Any] | None, "the KV-cache assessment (null without memory figures)"]
    notes: Annotated[list[str], "operator notes from the lane"]
    lint: Annotated[LintSummary, "what lint warned about and skipped"]
    layers: Annotated[list[str], "the lane file and the override layers that set anything"]
    pools: NotRequired[Annotated[dict[str, PoolSpec], "prefill, decode and router (P/D lanes only)"]]
    secrets: NotRequired[Annotated[SecretsRecord, "names, env file and hash (only when a secret is set)"]]
    overrides: NotRequired[Annotated[list[OverrideLayer], "what each override layer set (only when one did)"]]
