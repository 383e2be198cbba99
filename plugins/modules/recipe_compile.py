#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the recipe_compile action (the code is plugins/action/recipe_compile.py)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: recipe_compile
short_description: Compile a vLLM recipe and a choice into a lane file and/or every node's serve command
version_added: 0.2.0
description:
  - Reads a vLLM recipe in either form, the upstream source form (C(models/<org>/<repo>.yaml), resolved
    against the nearest parent holding C(taxonomy.yaml) and C(strategies/), or O(recipe_root)) or the
    rendered JSON form (resolved the same way, else against the collection's own C(recipes/) tree).
  - Composes every node's C(vllm serve) argv and environment for the choice exactly as vLLM's recipe site
    does (argument order, last-occurrence-wins dedupe, hardware-override precedence, TP auto-fit, per-strategy
    rank flags, DEP start ranks, P/D roles, ports and router).
  - A choice the recipe cannot run (unknown variant, strategy, feature or mode, precision not supported on the
    hardware, a strategy below its GPU floor, an omni recipe, too few or too many nodes, ...) fails with one
    sentence naming the recipe, the choice and the rule.
  - With O(commands_file), writes the composed commands as JSON in the shape of the conformance corpus's
    C(expected) entries (C(deployType), C(model), C(commands) with C(role), C(node), C(argv), C(env), and
    C(router) for pd_cluster), placeholders such as C($HEAD_IP) left literal.
  - With O(lane_file), or when O(commands_file) is not given, writes a lane file in the hand-written lanes'
    schema (each value commented with the recipe layer it came from, the recipe's notes in C(notes)). Only
    layouts the plan deploys today are written (C(single_node_tp), C(single_node_tep), C(multi_node_tp),
    C(multi_node_tep), C(multi_node_tp_pp)) on hardware lanekit has a profile for; other choices compile but
    the lane is refused with a sentence.
  - Runs on the controller only (action plugin); no host is contacted. Files are written atomically and only
    when their content changes.
options:
  recipe:
    description:
      - Path of the recipe file (YAML source form or rendered JSON), relative to the working directory,
        or a recipe's name (C(mistralai/Mistral-Large-4-1T-A52B)).
      - A name is looked up in O(recipes_dir), then in the collection's own C(recipes/), as C(<name>.json),
        C(<name>.yaml) or C(models/<name>.yaml); when none matches, the sentence lists the names found there.
    type: str
    required: true
  recipes_dir:
    description: The user's recipes directory, searched for a recipe name before the collection's; default C(recipes)
      in the working directory (C(lanekit_recipes_dir) in the playbooks).
    type: str
  recipe_root:
    description: The recipe tree root (C(taxonomy.yaml) and C(strategies/)); default the nearest parent of O(recipe).
    type: str
  hardware:
    description: Hardware profile id of the tree's taxonomy (for example C(gb300), C(h200), C(mi355x)).
    type: str
  strategy:
    description:
      - Serving strategy id (a C(strategies/<id>.yaml) of the tree).
      - In cluster mode (O(nodes_group)), unset without a O(preset) takes the recipe's recommended strategy for the
        group's nodes, as the recipe site does (its C(recommended_command) when that is for this hardware and fits,
        else the first offered strategy that fits; prefill/decode is never taken on its own). Elsewhere a missing
        strategy is refused with a sentence naming the strategies the recipe offers on the hardware.
    type: str
  variant:
    description: Recipe variant; default C(default) (or the preset's first variant).
    type: str
  preset:
    description: A preset of the recipe (lanekit's own key); it may name the hardware, strategy, nodes and pools.
    type: str
  features:
    description: The complete enabled feature set, a list or C(a,b); unset means the recipe's defaults.
    type: raw
  feature_modes:
    description: 'Mode picks per feature, a mapping or its JSON (C({"spec_decoding": "mtp"})).'
    type: raw
  nodes:
    description: Node count of a multi-node strategy (default the smallest count clearing the recipe's GPU floor).
    type: raw
  pd:
    description:
      - 'P/D pools of pd_cluster, C({"prefill": {"nodes": N, "parallelism": "tp|tep|dep"}, "decode": {...}}), a mapping
        or its JSON; C(nodes 0) co-locates both pools on one node.'
      - Default the recipe site's sizing.
    type: raw
  lane_file:
    description: Write the lane here (C(<lane name>.yml)); default C(<lanes_dir>/<derived name>.yml) unless only
      O(commands_file) is given.
    type: str
  lanes_dir:
    description: Directory of the default lane file; default C(lanes) in the working directory.
    type: str
  images_dir:
    description:
      - The user's image specs; default C(images) in the working directory (C(lanekit_images_dir) in the playbooks).
      - When a lane is written and C(<images_dir>/<image>/image.yml) does not exist, the recipe's docker image for
        the hardware is written there as the lane's image spec (no digest unless the recipe pins one), so the next
        plan finds it; a spec already there is never changed.
    type: str
  arch:
    description: The nodes' CPU architecture (C(amd64), C(arm64)) the image spec's pin line names; default
      C(arm64) for C(dgx_spark_gb10), C(gb200) and C(gb300), else C(amd64) (C(lanekit_node_arch) in the playbooks).
    type: str
  commands_file:
    description: Write the composed commands here as JSON.
    type: str
  list_choices:
    description:
      - List what the recipe offers instead of compiling a choice (the C(recipe_lane) playbook's
        C(-e recipe_list=true)), per hardware profile the strategies and variants the compiler accepts there,
        the features (opt-in ones marked), the presets and the recommended command. Nothing is written.
    type: bool
    default: false
  nodes_group:
    description:
      - Cluster mode, used by the preflight role for C(lanekit.serving.plan_lane)/C(lanekit.serving.deploy_lane) C(-e recipe=PATH).
        The choice is sized to this inventory group's hosts (node count) and the first host's
        C(lanekit_hardware) and C(lanekit_gpus_per_node) (default the hardware profile's); a choice for other
        hardware, a single-node strategy on several hosts, or too few nodes or GPUs is refused with a sentence.
      - The lane is written to C(<reports>/<lane>/<lane>.yml) and the recipe's docker image for the hardware to
        C(<reports>/<lane>/images/<image>/image.yml), without a digest unless the recipe pins one (the plan warns
        and a deploy refuses until C(lanekit_image_digests) sets it). These files are written in check mode too.
        O(lane_file) and O(commands_file) are ignored.
    type: str
attributes:
  check_mode:
    support: full
    details: The choice is compiled and checked in check mode; no file is written.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: The same recipe and choice write byte-identical files; a second run reports no change.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
"""

EXAMPLES = r"""
---
- name: Compile the seed recipe's recommended choice into a commands file
  lanekit.serving.recipe_compile:
    recipe: recipes/mistralai/Mistral-Large-4-1T-A52B.json
    hardware: gb300
    strategy: single_node_tp
    commands_file: /tmp/commands.json

- name: Compile an upstream recipe into a lane over 8 DGX Sparks
  lanekit.serving.recipe_compile:
    recipe: ../recipes/models/deepseek-ai/DeepSeek-V4-Flash.yaml
    hardware: dgx_spark_gb10
    strategy: multi_node_tp
    nodes: 8
    lane_file: lanes/dsv4-flash-8x-spark.yml
"""

RETURN = r"""
commands:
  description: The composed commands in the corpus's C(expected) shape.
  returned: success
  type: dict
  sample:
    deployType: single_node
    model: org/model
    commands:
      - {role: single, node: 0, argv: [vllm, serve, org/model], env: {}}
choice:
  description: The resolved choice (defaults filled in).
  returned: success
  type: dict
notes:
  description: The recipe's notes and troubleshooting entries that apply to the choice.
  returned: success
  type: list
  elements: str
docker_image:
  description: The recipe's docker image for the hardware and variant.
  returned: success
  type: str
command_lines:
  description: The composed commands as printable lines, per node a heading, its environment and its command.
  returned: when a choice is compiled outside cluster mode
  type: list
  elements: str
image_spec:
  description: The lane's image spec (written when it was missing, or the user's, kept).
  returned: when a lane is written
  type: str
image_spec_written:
  description: Outside cluster mode, whether the image spec was written (in check mode, would be).
  returned: when a lane is written outside cluster mode
  type: bool
images_dir_created:
  description: Outside cluster mode, whether O(images_dir) did not exist before (it then shadows the collection's C(images/)).
  returned: when a lane is written outside cluster mode
  type: bool
lane_file:
  description: The lane file written (null when only commands were asked for).
  returned: success
  type: str
commands_file:
  description: The commands file written, if asked.
  returned: success
  type: str
lanes_dir:
  description: Cluster mode only, the directory holding the written lane (give it to M(lanekit.serving.lane_plan)).
  returned: when O(nodes_group) is set
  type: str
images_dir:
  description: Cluster mode only, the directory holding the lane's image spec.
  returned: when O(nodes_group) is set
  type: str
lane:
  description: The lane name written.
  returned: when a lane is written
  type: str
offer:
  description: With O(list_choices), what the recipe offers (hardware, features, opt_in_features, presets, recommended).
  returned: when O(list_choices) is true
  type: dict
offer_lines:
  description: With O(list_choices), the offer as printable lines.
  returned: when O(list_choices) is true
  type: list
  elements: str
strategy_recommended:
  description: Cluster mode only, whether no strategy was asked for and the recipe's recommended one was taken.
  returned: when O(nodes_group) is set
  type: bool
strategies:
  description: Cluster mode only, the strategies the recipe offers on the nodes' hardware, in the recipe's order.
  returned: when O(nodes_group) is set
  type: list
  elements: str
"""
