# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe loading: read a vLLM recipe in either form and the tree it is resolved against.

One job: turn a path into a :class:`RecipeSource` (the recipe mapping, the hardware profiles, the
serving strategies), or a sentence saying what is missing. The two input forms:

- the upstream source form, ``models/<org>/<repo>.yaml``, read with ``taxonomy.yaml`` and
  ``strategies/*.yaml`` of its tree root (the nearest parent holding both, or an explicit root);
- the rendered JSON form (the recipe site's published JSON, like the seed), which carries no
  taxonomy or strategies: it is resolved against the same kind of tree root, else the collection's
  own ``recipes/`` tree.

YAML is read the way the recipe site reads it (YAML 1.2 booleans: only true/false), so an unquoted
``on`` or ``no`` stays a string.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

try:
    import yaml
except ImportError:  # module_utils must import anywhere; the compiler runs on the controller, which has PyYAML
    yaml = None

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
BUNDLED_ROOT = os.path.join(COLLECTION_ROOT, "recipes")


def _yaml12_loader() -> type:
    """A SafeLoader whose implicit booleans are YAML 1.2's (true/false), as js-yaml reads recipes."""
    if yaml is None:
        raise LanekitError("reading a YAML recipe needs PyYAML on the controller (pip install PyYAML).")

    class Yaml12Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        pass

    Yaml12Loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return Yaml12Loader


@dataclass
class RecipeSource:
    """A recipe and the tree it was resolved against."""

    path: str
    form: str  # "yaml" (upstream source) or "json" (rendered)
    recipe: dict
    root: str
    profiles: dict
    strategies: dict
    name: str = ""  # how messages name the recipe
    extra: dict = field(default_factory=dict)


def read_data(path: str) -> object:
    """Parse one JSON or YAML file; a sentence naming the file and the line otherwise."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise LanekitError(f"{path} cannot be read ({exc.strerror}); pass an existing recipe file.") from None
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise LanekitError(f"{path} is not valid JSON ({exc}).") from None
    loader = _yaml12_loader()
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise LanekitError(f"{path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}.") from None


def is_tree_root(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "taxonomy.yaml")) and os.path.isdir(os.path.join(path, "strategies"))


def find_root(recipe_path: str) -> str | None:
    """The nearest parent directory of ``recipe_path`` holding ``taxonomy.yaml`` and ``strategies/``."""
    current = os.path.dirname(os.path.abspath(recipe_path))
    while True:
        if is_tree_root(current):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def load_tree(root: str) -> tuple[dict, dict]:
    """(hardware profiles, strategies by id) of a recipe tree root."""
    taxonomy = read_data(os.path.join(root, "taxonomy.yaml"))
    if not isinstance(taxonomy, dict) or not isinstance(taxonomy.get("hardware_profiles"), dict):
        raise LanekitError(f"{os.path.join(root, 'taxonomy.yaml')} has no 'hardware_profiles' mapping; "
                           "point recipe_root at a recipe tree (taxonomy.yaml and strategies/).")
    strategies = {}
    sdir = os.path.join(root, "strategies")
    for name in sorted(os.listdir(sdir)):
        if not name.endswith((".yaml", ".yml")):
            continue
        data = read_data(os.path.join(sdir, name))
        if not isinstance(data, dict):
            raise LanekitError(f"{os.path.join(sdir, name)} must be a mapping (a serving strategy).")
        strategies[str(data.get("name") or name.rsplit(".", 1)[0])] = data
    return taxonomy["hardware_profiles"], strategies


def load_recipe(path: str, root: str | None = None) -> RecipeSource:
    """Load the recipe at ``path`` (either form) against ``root`` or its nearest tree root."""
    if not path:
        raise LanekitError("no recipe given: pass -e recipe=PATH (a models/<org>/<repo>.yaml or a rendered JSON).")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.isfile(path):
        raise LanekitError(f"recipe {path} does not exist; pass the path of a recipe file.")
    data = read_data(path)
    if not isinstance(data, dict) or not isinstance(data.get("variants"), dict) or "model" not in data:
        raise LanekitError(f"{path} is not a vLLM recipe: it needs 'model' and 'variants' mappings.")
    form = "json" if path.endswith(".json") else "yaml"
    if root:
        root = os.path.abspath(os.path.expanduser(str(root)))
        if not is_tree_root(root):
            raise LanekitError(f"recipe_root {root} holds no taxonomy.yaml and strategies/; "
                               "pass the root of a recipe tree.")
    else:
        root = find_root(path)
        if root is None and form == "json":
            # The rendered form carries no taxonomy: use the one the collection ships.
            root = BUNDLED_ROOT if is_tree_root(BUNDLED_ROOT) else None
        if root is None:
            raise LanekitError(f"recipe {path} is not inside a recipe tree (no parent holds taxonomy.yaml and "
                               "strategies/); pass -e recipe_root=DIR.")
    profiles, strategies = load_tree(root)
    model_id = ((data.get("model") or {}).get("model_id")) or data.get("hf_id") or os.path.basename(path)
    return RecipeSource(path=path, form=form, recipe=data, root=root, profiles=profiles,
                        strategies=strategies, name=str(model_id))
