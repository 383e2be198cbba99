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

``-e recipe=`` takes a path or a recipe's name (``mistralai/Mistral-Large-4-1T-A52B``): a name is
looked up in the user's recipes directory (``lanekit_recipes_dir``, else ``./recipes``), then in the
collection's own ``recipes/``, as ``<name>.json`` / ``<name>.yaml`` or ``models/<name>.yaml``
(:func:`resolve_recipe`).

YAML is read the way the recipe site reads it (YAML 1.2 booleans: only true/false), so an unquoted
``on`` or ``no`` stays a string.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import load_json_text, load_text, read_limited
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _schema as _recipe_schema

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
BUNDLED_ROOT = os.path.join(COLLECTION_ROOT, "recipes")


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


RECIPE_SUFFIXES = ("", ".json", ".yaml", ".yml")
_NAMES_SHOWN = 12


def recipe_names(root: str) -> list[str]:
    """The names a recipes directory answers to: rendered JSON files by their path under ``root``,
    upstream source files by their path under ``models/`` (no suffix either way)."""
    names = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("strategies", "expected", "__pycache__") and not d.startswith("."))
        rel = os.path.relpath(dirpath, root)
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            if suffix == ".json":
                names.append(os.path.normpath(os.path.join(rel, stem)))
            elif suffix in (".yaml", ".yml") and (rel == "models" or rel.startswith("models" + os.sep)):
                names.append(os.path.normpath(os.path.join(os.path.relpath(dirpath, os.path.join(root, "models")), stem)))
    return sorted(set(names))


_LISTED: dict = {}  # (path, mtime) -> the recipe's meta.hardware, so that a sweep of refusals reads each file once


def _listed_hardware(path: str) -> dict:
    key = (path, os.stat(path).st_mtime_ns)
    if key not in _LISTED:
        try:
            data = read_data(path)
        except LanekitError:
            data = {}
        listed = ((data.get("meta") or {}).get("hardware") if isinstance(data, dict) else None) or {}
        _LISTED[key] = listed if isinstance(listed, dict) else {}
    return _LISTED[key]


def recipes_listing(root: str, hardware: str, limit: int = 200) -> list[str]:
    """The names of the recipes of the tree at ``root`` whose ``meta.hardware`` lists ``hardware`` (not as
    unsupported), for the refusal of a restricted profile; unreadable files are passed over (at most ``limit``
    files are read: a refusal's hint, not a scan of a whole disk)."""
    out = []
    for name in recipe_names(root)[:limit]:
        for path in (os.path.join(root, name + ".json"), os.path.join(root, "models", name + ".yaml"),
                     os.path.join(root, "models", name + ".yml")):
            if not os.path.isfile(path):
                continue
            listed = _listed_hardware(path)
            if hardware in listed and listed[hardware] != "unsupported":
                out.append(name)
            break
    return out


def resolve_recipe(value: str, cwd: str, user_dir: str | None = None) -> str:
    """The recipe file ``-e recipe=VALUE`` means: an existing path (absolute, or relative to ``cwd``), else a
    name found in ``user_dir`` (default ``<cwd>/recipes``), then in the collection's ``recipes/``."""
    if not value:
        raise LanekitError("no recipe given: pass -e recipe=NAME (a recipe of ./recipes or of the collection's "
                           "recipes/) or -e recipe=PATH (a models/<org>/<repo>.yaml or a rendered JSON).")
    text = os.path.expanduser(str(value))
    direct = text if os.path.isabs(text) else os.path.join(cwd, text)
    if os.path.exists(direct) or os.path.isabs(text):
        return direct
    user_dir = os.path.join(cwd, str(user_dir)) if user_dir else os.path.join(cwd, "recipes")
    # The user's own first: a team's edited copy of a recipe wins over the one the collection ships.
    roots = [user_dir] + ([BUNDLED_ROOT] if os.path.realpath(user_dir) != os.path.realpath(BUNDLED_ROOT) else [])
    for root in roots:
        for sub in ("", "models"):
            for suffix in RECIPE_SUFFIXES:
                candidate = os.path.join(root, sub, text + suffix)
                if os.path.isfile(candidate):
                    return candidate
    # The docs' examples name the shipped recipe by its path in the collection (recipes/<org>/<model>.json).
    shipped = os.path.normpath(os.path.join(COLLECTION_ROOT, text))
    if shipped.startswith(BUNDLED_ROOT + os.sep) and os.path.isfile(shipped):
        return shipped
    known = sorted({n for root in roots if os.path.isdir(root) for n in recipe_names(root)})
    shown = ", ".join(known[:_NAMES_SHOWN]) + (f" and {len(known) - _NAMES_SHOWN} more" if len(known) > _NAMES_SHOWN else "")
    raise LanekitError(f"recipe {value} is neither a file ({direct}) nor a recipe name in {user_dir} or the collection's "
                       f"recipes/; pass the path of a recipe file or one of these names: {shown or 'none found'}.")


def read_data(path: str, what: str = "") -> object:
    """Parse one JSON or YAML file through the collection's loader (size, encoding, alias and depth
    limits; duplicate keys refused); a sentence naming the file and the line otherwise."""
    data = read_limited(path, what)
    if path.endswith(".json"):
        return load_json_text(data, path)
    return load_text(data, path, yaml12=True)


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
    path = os.path.join(root, "taxonomy.yaml")
    taxonomy = _recipe_schema.check_taxonomy(read_data(path), path)
    strategies = {}
    sdir = os.path.join(root, "strategies")
    try:
        names = sorted(os.listdir(sdir))
    except OSError as exc:
        raise LanekitError(f"{sdir} cannot be read ({exc.strerror or exc}); point recipe_root at a recipe tree.") from None
    for name in names:
        if not name.endswith((".yaml", ".yml")):
            continue
        spath = os.path.join(sdir, name)
        data = _recipe_schema.check_strategy(read_data(spath), spath)
        strategies[str(data.get("name") or name.rsplit(".", 1)[0])] = data
    return taxonomy["hardware_profiles"], strategies


def load_recipe(path: str, root: str | None = None) -> RecipeSource:
    """Load the recipe at ``path`` (either form) against ``root`` or its nearest tree root."""
    if not path:
        raise LanekitError("no recipe given: pass -e recipe=PATH (a models/<org>/<repo>.yaml or a rendered JSON).")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if os.path.isdir(path):
        raise LanekitError(f"recipe {path} is a directory; pass the path of a recipe file in it "
                           "(a models/<org>/<repo>.yaml or a rendered JSON).")
    if not os.path.exists(path):
        raise LanekitError(f"recipe {path} does not exist; pass the path of a recipe file.")
    return recipe_from_data(read_data(path, "; pass the path of a recipe file"), path, root)


def recipe_from_data(data: Any, path: str, root: str | None = None, tree: tuple[dict, dict] | None = None) -> RecipeSource:
    """A :class:`RecipeSource` from already-parsed recipe data (typed here) and the tree at ``root`` or above ``path``.

    ``tree``: (profiles, strategies) already read from that root (``load_tree``), to compile many
    recipes against one tree without reading it again."""
    data = _recipe_schema.check_recipe(data, path)
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
    profiles, strategies = tree if tree is not None else load_tree(root)
    model_id = ((data.get("model") or {}).get("model_id")) or data.get("hf_id") or os.path.basename(path)
    return RecipeSource(path=path, form=form, recipe=data, root=root, profiles=profiles,
                        strategies=strategies, name=str(model_id))
