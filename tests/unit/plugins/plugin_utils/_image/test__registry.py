# Copyright: lanekit developers
# Apache-2.0
"""_image_registry: the builder's registry container is recreated when the inventory adds or changes
TLS, htpasswd, the bind address or the port; a registry set up by hand is not recreated for what
lanekit does not set, keeps it when it is recreated, and is never weakened behind the user's back."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _registry as reg

IMAGE_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
TLS = {"tls_cert": "/etc/lanekit/registry.crt", "tls_key": "/etc/lanekit/registry.key"}
AUTH = {"htpasswd": "/etc/lanekit/registry.htpasswd"}


def inspected(env=(), binds=(), ports=(("10.0.0.11", "5000"),), data=("volume", "lanekit-registry")):
    """A registry container as `docker inspect` (docker_container_info's `container`) shows it."""
    mounts = [{"Type": data[0], ("Name" if data[0] == "volume" else "Source"): data[1],
               "Destination": "/var/lib/registry", "RW": True}]
    mounts += [{"Type": "bind", "Source": src, "Destination": dst, "Mode": "ro", "RW": False} for src, dst in binds]
    return {"Name": "/lanekit-registry", "Config": {"Env": IMAGE_ENV + list(env)}, "Mounts": mounts,
            "HostConfig": {"PortBindings": {"5000/tcp": [{"HostIp": ip, "HostPort": port} for ip, port in ports]}}}


def as_created(decision):
    """The container docker_container makes from a decision, inspected again."""
    binds = []
    for item in decision.volumes[1:]:
        src, dst, *_mode = item.split(":")
        binds.append((src, dst))
    ports = [(p.rsplit(":", 2)[0].strip("[]"), p.rsplit(":", 2)[1]) for p in decision.published_ports]
    env = [f"{k}={v}" for k, v in decision.env.items()]
    return inspected(env=env, binds=binds, ports=ports)


def decide(container, **wanted):
    return reg.decide(container, reg.Wanted(bind=wanted.pop("bind", "10.0.0.11"), port=wanted.pop("port", 5000),
                                            **wanted), name="lanekit-registry", host="spark-01")


def test_no_container_is_created_on_the_fabric_address_with_the_data_volume():
    got = decide(None)
    assert got.action == "create"
    assert got.volumes == ["lanekit-registry:/var/lib/registry"]
    assert got.published_ports == ["10.0.0.11:5000:5000"] and got.env == {}


def test_a_registry_as_lanekit_made_it_is_kept_and_kept_again():
    first = decide(None, **AUTH)
    again = decide(as_created(first), **AUTH)
    assert again.action == "keep" and again.reasons == []


def test_adding_htpasswd_recreates_the_registry_with_logins():
    got = decide(inspected(), **AUTH)
    assert got.action == "recreate"
    assert got.reasons == ["htpasswd logins are added"]
    assert got.env["REGISTRY_AUTH"] == "htpasswd"
    assert got.env["REGISTRY_AUTH_HTPASSWD_PATH"] == "/auth/htpasswd"
    assert "/etc/lanekit/registry.htpasswd:/auth/htpasswd:ro" in got.volumes
    # The pushed images stay: the data volume is the one it had.
    assert got.volumes[0] == "lanekit-registry:/var/lib/registry"
    assert decide(as_created(got), **AUTH).action == "keep"


def test_adding_tls_recreates_the_registry_serving_tls():
    got = decide(inspected(), **TLS)
    assert got.action == "recreate" and got.reasons == ["TLS is added"]
    assert got.env["REGISTRY_HTTP_TLS_CERTIFICATE"] == "/certs/registry.crt"
    assert got.env["REGISTRY_HTTP_TLS_KEY"] == "/certs/registry.key"
    assert "/etc/lanekit/registry.crt:/certs/registry.crt:ro" in got.volumes
    assert "/etc/lanekit/registry.key:/certs/registry.key:ro" in got.volumes
    assert decide(as_created(got), **TLS).action == "keep"


def test_other_tls_or_htpasswd_files_recreate_it():
    made = as_created(decide(None, **TLS, **AUTH))
    moved = decide(made, tls_cert="/etc/pki/new.crt", tls_key=TLS["tls_key"], **AUTH)
    assert moved.action == "recreate"
    assert moved.reasons == ["its TLS certificate or key is not the inventory's (image_registry_tls_cert, image_registry_tls_key)"]
    assert "/etc/pki/new.crt:/certs/registry.crt:ro" in moved.volumes
    assert "/etc/lanekit/registry.crt:/certs/registry.crt:ro" not in moved.volumes
    other = decide(made, **TLS, htpasswd="/etc/lanekit/other.htpasswd")
    assert other.reasons == ["its htpasswd file is not the inventory's (image_registry_htpasswd)"]
    # The same file written another way is the same file.
    assert decide(made, tls_cert="/etc/lanekit//registry.crt", tls_key=TLS["tls_key"], **AUTH).action == "keep"


@pytest.mark.parametrize("ports, bind, port", [
    ((("0.0.0.0", "5000"),), "10.0.0.11", 5000),   # every interface (docker run -p 5000:5000)
    ((("", "5000"),), "10.0.0.11", 5000),          # the same, as older daemons write it
    ((("10.0.0.11", "5000"),), "10.0.0.12", 5000),  # the fabric address changed
    ((("10.0.0.11", "5000"),), "10.0.0.11", 5443),  # the port changed
    ((), "10.0.0.11", 5000),                        # not published at all
])
def test_another_bind_address_or_port_recreates_it(ports, bind, port):
    got = decide(inspected(ports=ports), bind=bind, port=port)
    assert got.action == "recreate"
    assert got.reasons[0].endswith(f"the inventory asks for {bind}:{port} (image_registry_bind, image_registry_port)")
    assert got.published_ports == [f"{bind}:{port}:5000"]


def test_an_ipv6_bind_is_published_in_brackets_and_matches_again():
    got = decide(None, bind="fd00::11")
    assert got.published_ports == ["[fd00::11]:5000:5000"]
    assert decide(inspected(ports=(("fd00::11", "5000"),)), bind="fd00::11").action == "keep"


def test_a_registry_set_up_by_hand_is_not_recreated_for_what_lanekit_does_not_set():
    by_hand = inspected(env=["REGISTRY_STORAGE_DELETE_ENABLED=true", "REGISTRY_HTTP_SECRET=s3"],
                        binds=[("/srv/registry/config.yml", "/etc/docker/registry/config.yml")],
                        data=("bind", "/srv/registry/data"))
    assert decide(by_hand).action == "keep"


def test_a_registry_set_up_by_hand_keeps_its_settings_and_its_data_when_recreated():
    by_hand = inspected(env=["REGISTRY_STORAGE_DELETE_ENABLED=true"],
                        binds=[("/srv/registry/config.yml", "/etc/docker/registry/config.yml")],
                        data=("bind", "/srv/registry/data"))
    got = decide(by_hand, **AUTH)
    assert got.action == "recreate"
    assert got.env["REGISTRY_STORAGE_DELETE_ENABLED"] == "true" and got.env["REGISTRY_AUTH"] == "htpasswd"
    assert "PATH" not in got.env  # the image's own, not pinned into the new container
    assert got.volumes == ["/srv/registry/data:/var/lib/registry",
                           "/srv/registry/config.yml:/etc/docker/registry/config.yml:ro",
                           "/etc/lanekit/registry.htpasswd:/auth/htpasswd:ro"]


def test_an_anonymous_data_volume_is_carried_over_by_its_name():
    got = decide(inspected(data=("volume", "3f" * 32)), **AUTH)
    assert got.volumes[0] == "3f" * 32 + ":/var/lib/registry"


@pytest.mark.parametrize("running, wanted, does, keys", [
    ({**TLS}, {}, "serves TLS", "image_registry_tls_cert and image_registry_tls_key are empty"),
    ({**AUTH}, {}, "asks for logins", "image_registry_htpasswd is empty"),
    ({**TLS, **AUTH}, {**TLS}, "asks for logins", "image_registry_htpasswd is empty"),
    ({**TLS, **AUTH}, {}, "serves TLS and asks for logins",
     "image_registry_tls_cert, image_registry_tls_key and image_registry_htpasswd are empty"),
])
def test_dropping_tls_or_logins_from_the_inventory_is_refused_with_the_fix(running, wanted, does, keys):
    made = as_created(decide(None, **running))
    with pytest.raises(ValueError) as err:
        decide(made, **wanted, port=5443)  # even with another change that would recreate it
    msg = str(err.value)
    assert msg.startswith(f"The registry container lanekit-registry on spark-01 {does} but the inventory's {keys},")
    assert "docker rm -f lanekit-registry on spark-01" in msg and "images stay in its volume" in msg
    assert "\n" not in msg and msg.count(". ") == 0
