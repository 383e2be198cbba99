# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The layers of an image as the distribution sees them: how many bottom layers a node already
holds (by chain ID, what ``docker load`` skips and what a shortened stream leaves out) and how many
bytes each layer weighs (from ``docker image history``), so the role can tell how much of an image
each node lacks before it picks a method (``plugin_utils/_image/_method.py``). Pure: no docker."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

# Instructions that only change the configuration: their history entry is an "empty layer" of 0
# bytes. The classic builder writes "/bin/sh -c #(nop)  ENV ..." (its ADD and COPY also carry #(nop)
# but make a layer); BuildKit writes the bare instruction. WORKDIR, RUN, ADD and COPY make a layer.
_METADATA = re.compile(
    r"^\s*(?:/bin/sh -c #\(nop\)\s*)?(?:ARG|CMD|ENTRYPOINT|ENV|EXPOSE|HEALTHCHECK|LABEL|MAINTAINER|ONBUILD|SHELL|"
    r"STOPSIGNAL|USER|VOLUME)\b", re.IGNORECASE)


def held_prefix(chains: list, present: Iterable) -> int:
    """How many bottom layers of an image (its chain IDs, bottom first) a node holds: the longest
    chain the node has. A node holding chain i holds every layer below it."""
    have = {str(item) for item in present or ()}
    for count in range(len(chains), 0, -1):
        if chains[count - 1] in have:
            return count
    return 0


def parse_history(text: str) -> list[tuple[int, str]]:
    """``docker image history --human=false --format '{{.Size}} {{json .CreatedBy}}'`` as
    (size, created by) pairs, oldest first (docker prints the newest first). Lines it cannot read
    are dropped: the caller then finds the counts do not add up."""
    entries = []
    for line in (text or "").splitlines():
        size, _sep, created = line.strip().partition(" ")
        if not size.isdigit():
            continue
        try:
            created_by = json.loads(created) if created else ""
        except ValueError:
            created_by = created
        entries.append((int(size), created_by if isinstance(created_by, str) else ""))
    return list(reversed(entries))


def layer_sizes(entries: list[tuple[int, str]], count: int) -> list[int]:
    """The size of each of the image's ``count`` layers, bottom first, from its history (oldest
    first), or [] when the history cannot be matched to the layers.

    An entry with bytes is a layer. History does not say which 0-byte entries are layers (a WORKDIR,
    an empty RUN) and which are configuration (ENV, LABEL): when the entries are exactly the layers,
    or the entries with bytes are, the match is certain; otherwise the 0-byte entries that are not
    configuration instructions are taken as the empty layers, if that makes the count.
    """
    if count <= 0:
        return []
    sized = [size for size, _created in entries if size > 0]
    if len(entries) == count:
        return [size for size, _created in entries]
    if len(sized) == count:
        return sized
    layers = [size for size, created in entries if size > 0 or not _METADATA.match(created)]
    return layers if len(layers) == count else []
