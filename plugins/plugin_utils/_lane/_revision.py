# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The Hugging Face revision ``lanekit.serving.pin`` writes into a lane's ``model.revision``.

One job: decide from the lane file whether its model has a Hub revision to pin, ask the Hub
through the given ``fetch`` (``HfApi().model_info(repo, revision=ref).sha`` in the action
plugin) and turn its answer or its failure into the commit id or one sentence.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

COMMIT_RE = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class HubModel:
    """What the lane file says about its model's Hub source."""
    repo: str
    current: str | None
    endpoint: str | None


def hub_model(lane_file: str, data: dict) -> HubModel | None:
    """The Hub model of a lane file, None when its weights do not come from the Hub (model.source.kind local)."""
    model = data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("id"), str) or not model["id"]:
        raise LanekitError(f"{lane_file}: key 'model.id' is missing; pin needs the model's Hub repository there.")
    raw_source = model.get("source")
    source: dict = raw_source if isinstance(raw_source, dict) else {}
    if source.get("kind", "hf") != "hf":
        return None
    current = model.get("revision")
    endpoint = source.get("endpoint")
    return HubModel(repo=model["id"], current=current if isinstance(current, str) else None,
                    endpoint=endpoint if isinstance(endpoint, str) and endpoint else None)


def resolve_revision(model: HubModel, ref: str, fetch: Callable[[str, str], object], lane_file: str) -> str:
    """The commit ``ref`` (a branch, tag or commit) names in the model's repository, or one sentence.

    ``fetch(repo, ref)`` returns the commit id or raises; the exception's class and text are
    all that is shown of it (a token never reaches them: it is not an argument here)."""
    try:
        sha = fetch(model.repo, ref)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # huggingface_hub raises its own classes (RepositoryNotFoundError, RevisionNotFoundError,
        # GatedRepoError, HTTP and connection errors); each is one sentence here, never a traceback.
        kind = type(exc).__name__
        first = (str(exc).strip().splitlines() or [""])[0]
        hint = {"RepositoryNotFoundError": "check model.id (and the token for a private repository)",
                "GatedRepoError": "accept the model's terms on the Hub and pass a token (-e pin_hf_token_file=PATH)",
                "RevisionNotFoundError": "check -e pin_revision (a branch, tag or commit of the repository)"}.get(
                    kind, "check the controller's network (and model.source.endpoint for a mirror), then re-run")
        raise LanekitError(f"could not read revision {ref!r} of {model.repo} from the Hub for {lane_file}: "
                           f"{kind}{': ' + first if first else ''}; {hint}.") from None
    if not isinstance(sha, str) or not COMMIT_RE.fullmatch(sha):
        raise LanekitError(f"the Hub answered {sha!r} for revision {ref!r} of {model.repo}, which is not a "
                           f"40-character commit id; set model.revision in {lane_file} by hand.")
    return sha
