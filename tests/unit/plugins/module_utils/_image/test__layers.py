"""Issue 28 part 4: the layers a node holds and what each layer weighs (module_utils/_image/_layers.py),
read by image_info for the image role's auto method."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import chain_ids
from ansible_collections.lanekit.serving.plugins.module_utils._image._layers import (
    held_prefix,
    layer_sizes,
    parse_history,
)

LAYERS = [f"sha256:{n:064x}" for n in range(1, 5)]
CHAINS = chain_ids(LAYERS)


@pytest.mark.parametrize(("present", "held"), [
    ([], 0),
    ([CHAINS[0]], 1),
    ([CHAINS[1], "sha256:" + "f" * 64], 2),
    # The longest chain counts: holding chain 3 means holding the layers below it.
    ([CHAINS[2]], 3),
    (CHAINS, 4),
    # A layer held on top of another stack is not this image's bottom layer: chain IDs, not layer digests.
    ([LAYERS[1], LAYERS[2]], 0),
])
def test_a_node_holds_the_longest_bottom_stack_it_has(present, held):
    assert held_prefix(CHAINS, present) == held


def history(*entries):
    """docker image history's lines, newest first, from (size, created by) oldest first."""
    return "\n".join(f"{size} {json.dumps(created)}" for size, created in reversed(entries))


def test_the_history_is_read_oldest_first_and_unreadable_lines_are_dropped():
    text = history((100, "ADD rootfs.tar.xz /"), (0, "CMD [\"bash\"]"), (7, "RUN echo 'a\nb'")) + "\nWARNING: junk\n"
    assert parse_history(text) == [(100, "ADD rootfs.tar.xz /"), (0, 'CMD ["bash"]'), (7, "RUN echo 'a\nb'")]


@pytest.mark.parametrize(("entries", "count", "sizes"), [
    # Every entry a layer.
    ([(100, "ADD a"), (0, "RUN true"), (5, "RUN b")], 3, [100, 0, 5]),
    # Configuration steps are 0-byte entries without a layer.
    ([(100, "ADD a"), (0, "/bin/sh -c #(nop)  ENV A=1"), (5, "RUN b"), (0, "CMD [\"x\"]")], 2, [100, 5]),
    # A 0-byte layer (WORKDIR) among configuration steps, classic and BuildKit spellings.
    ([(100, "/bin/sh -c #(nop) ADD file:ab in / "), (0, "/bin/sh -c #(nop)  LABEL a=b"), (0, "WORKDIR /app"),
      (0, "ENV X=1"), (3, "RUN |1 A=b /bin/sh -c make"), (0, "ENTRYPOINT [\"vllm\"]")], 3, [100, 0, 3]),
    # Cannot be matched (two 0-byte RUN entries, one of them a layer): the caller knows no sizes.
    ([(100, "ADD a"), (0, "RUN true"), (0, "RUN false"), (5, "RUN b")], 3, []),
    ([(100, "ADD a")], 2, []),
    ([], 0, []),
])
def test_each_layer_gets_its_size_or_none_when_the_history_does_not_match(entries, count, sizes):
    assert layer_sizes(entries, count) == sizes
