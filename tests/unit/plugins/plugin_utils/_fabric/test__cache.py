"""Issue 25: a fabric result stays valid while the nodes, the image pin and the fabric env are unchanged."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _cache, _launch
from tests.unit.plugins.plugin_utils._fabric.helpers_plan import plan, rank

FLOOR = {"op": "all_gather", "gbps": 0.5}


def material(p, **kw):
    spec = _launch.specs(p, sizes=kw.get("sizes"), iters=5, timeout_s=60, port=None, floor=FLOOR)
    return _cache.material(p, spec, 1)


def test_the_key_holds_while_nothing_the_fabric_depends_on_moves():
    base = material(plan())
    assert _cache.key(base) == _cache.key(material(plan()))
    # engine settings that are not fabric settings do not move it
    other = plan(ranks=[rank(0, "cpu-01", "10.0.0.1", env={"VLLM_CPU_KVCACHE_SPACE": "4"}),
                        rank(1, "cpu-02", "10.0.0.2", role="worker")])
    assert _cache.key(material(other)) == _cache.key(base)
    # and a changed floor is judged again, not measured again: it is not in the key
    assert "floor" not in base


def test_nodes_image_and_fabric_env_move_it_and_say_which():
    base = material(plan())
    image = plan(image={"ref": "lanekit/img:def", "pin": {"ref": "lanekit/img:def", "content_hash": "def"}})
    env = plan(ranks=[rank(0, "cpu-01", "10.0.0.1", env={"NCCL_IB_HCA": "mlx5_0"}), rank(1, "cpu-02", "10.0.0.2")])
    devices = plan(ranks=[rank(0, "cpu-01", "10.0.0.1", devices=["/dev/infiniband"]), rank(1, "cpu-02", "10.0.0.2")])
    nodes = plan(ranks=[rank(0, "cpu-01", "10.0.0.1"), rank(1, "cpu-03", "10.0.0.3")])
    for other, why in ((image, ["image"]), (env, ["cpu-01 env"]), (devices, ["cpu-01 options"]), (nodes, ["nodes"])):
        moved = material(other)
        assert _cache.key(moved) != _cache.key(base)
        assert _cache.changed(base, moved) == why
    assert _cache.changed(None, base) == ["no stored result"]
    assert _cache.changed(base, material(plan(), sizes=[4096])) == ["sizes"]
