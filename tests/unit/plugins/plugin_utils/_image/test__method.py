"""Issue 28 part 4: the image role's auto method from tables of node states (plugin_utils/_image/_method.py).

An image of 10 layers: a 900 MB base (layers 0-7), a 90 MB layer (8) and a 10 MB patch layer (9),
1 GB in all. A node reports current, local_copy and held_layers (bottom layers of the image it holds)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._image._method import RELAY_TRANSFERS, choose_method

MB = 1_000_000
SIZES = [112_500_000] * 8 + [90 * MB, 10 * MB]
CURRENT = {"current": True, "held_layers": 10}
FRESH = {"current": False, "held_layers": 0}
BASE = {"current": False, "held_layers": 8}
PATCH = {"current": False, "held_layers": 9}
RETAG = {"current": False, "local_copy": "sha256:" + "e" * 64, "held_layers": 10}


def nodes(*states):
    """spark-01 is the builder and holds the image; the others take the given states."""
    return {"spark-01": CURRENT, **{f"spark-{i:02d}": state for i, state in enumerate(states, start=2)}}


@pytest.mark.parametrize(("reports", "method", "needing", "star"), [
    # Nothing to send: every node holds it, or re-tags a local copy.
    (nodes(*[CURRENT] * 7), "stream", 0, 0.0),
    (nodes(*[CURRENT] * 6, RETAG), "stream", 0, 0.0),
    # A fresh image on seven nodes: seven whole images through the builder's uplink; the chain carries one.
    (nodes(*[FRESH] * 7), "relay", 7, 7.0),
    # A new top layer over a base every node holds (10% each): 0.7 images by the star, under the relay's cost.
    (nodes(*[BASE] * 7), "stream", 7, 0.7),
    # The patch layer changed: 1% each.
    (nodes(*[PATCH] * 7), "stream", 7, 0.07),
    # One new node lacks everything, the others the patch: one image and a little, still the star.
    (nodes(FRESH, *[PATCH] * 6), "stream", 7, 1.06),
    # Two new nodes: the star would carry more than the relay's cost.
    (nodes(FRESH, FRESH, *[PATCH] * 5), "relay", 7, 2.05),
    # Most of the image missing on most nodes (the words), some nodes current.
    (nodes(FRESH, FRESH, FRESH, CURRENT, CURRENT, CURRENT, CURRENT), "relay", 3, 3.0),
    # A single node that lacks everything: a chain of one is the stream.
    (nodes(FRESH), "stream", 1, 1.0),
])
def test_the_method_follows_what_the_nodes_lack(reports, method, needing, star):
    choice = choose_method(reports, SIZES, forks=16)
    assert (choice.method, choice.needing, round(choice.star_transfers, 2)) == (method, needing, star)
    assert choice.image_bytes == sum(SIZES)
    assert choice.message.startswith(f"image method auto: {method}")


def test_the_line_names_the_choice_and_the_figures():
    choice = choose_method(nodes(*[FRESH] * 7), SIZES, forks=16)
    assert choice.message == ("image method auto: relay, 7 of 8 nodes need the image (0.93 GiB) and lack 100% of it "
                              f"on average: the stream would send 7.00 images from the builder, the relay about "
                              f"{RELAY_TRANSFERS} over every link")
    assert "nothing to send: all 8 nodes hold the image (1 re-tag a local copy)" in choose_method(
        nodes(*[CURRENT] * 6, RETAG), SIZES, forks=16).message


def test_the_relay_is_not_chosen_when_ansible_cannot_run_every_node_at_once():
    choice = choose_method(nodes(*[FRESH] * 7), SIZES, forks=5)
    assert choice.method == "stream"
    assert "the relay runs all 8 nodes at once and Ansible runs 5 (forks; set -f 8)" in choice.message


def test_without_layer_sizes_the_stream_sends_each_node_what_it_lacks():
    # docker image history could not be matched to the layers, or (check mode) the image is not built yet.
    choice = choose_method(nodes(*[FRESH] * 7), [], forks=16)
    assert choice.method == "stream" and choice.needing == 7
    assert "could not tell the image's layer sizes" in choice.message


@pytest.mark.parametrize("method", ["stream", "relay", "registry"])
def test_an_explicit_method_is_kept_as_set(method):
    choice = choose_method(nodes(*[FRESH] * 7), SIZES, forks=1, requested=method)
    assert choice.method == method and choice.message == f"image method {method} (set by image_method)"


@pytest.mark.parametrize(("reports", "requested", "words"), [
    (nodes(FRESH), "fastest", "image_method is 'fastest'; use auto, stream, relay or registry"),
    (nodes({"current": False, "held_layers": "8"}), "auto", "held_layers is '8', not a count"),
])
def test_bad_input_is_one_sentence(reports, requested, words):
    with pytest.raises(LanekitError, match=words):
        choose_method(reports, SIZES, forks=16, requested=requested)
