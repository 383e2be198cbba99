# Copyright: lanekit developers
# Apache-2.0
"""The builder's registry container: does the one running match the inventory, and what to run if not.

One job: compare the inspection of the existing container (``docker_container_info``'s
``container``) with the settings the inventory asks for - TLS files, htpasswd file, bind address
and port - and say whether to create it, keep it or recreate it, and with which env, volumes and
published port. community.docker's own comparison cannot be used for this: strict comparisons
would recreate a registry set up by hand for every extra env entry or mount it has, and
``allow_more_present`` never notices a setting the inventory dropped. So the role compares only
what lanekit sets, here, and lets ``docker_container`` recreate when told to.

On recreation the container keeps what lanekit does not set (its other env entries and mounts,
and wherever its data lives), so nothing the user added by hand and no pushed image is lost.
A running registry that serves TLS or asks for logins while the inventory no longer names the
files is refused, not weakened: dropping protection must be a deliberate act (remove the container),
never the side effect of a variable that went missing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

DATA_DIR = "/var/lib/registry"
CERT = "/certs/registry.crt"
KEY = "/certs/registry.key"
HTPASSWD = "/auth/htpasswd"
PORT_KEY = "5000/tcp"
TLS_ENV = {"REGISTRY_HTTP_TLS_CERTIFICATE": CERT, "REGISTRY_HTTP_TLS_KEY": KEY}
AUTH_ENV = {"REGISTRY_AUTH": "htpasswd", "REGISTRY_AUTH_HTPASSWD_REALM": "lanekit",
            "REGISTRY_AUTH_HTPASSWD_PATH": HTPASSWD}
# Keys and mount targets lanekit owns: these are compared and replaced, everything else is kept.
OWN_ENV = frozenset(TLS_ENV) | frozenset(AUTH_ENV)
OWN_TARGETS = frozenset((CERT, KEY, HTPASSWD))


@dataclass(frozen=True)
class Wanted:
    """The registry the inventory asks for (paths are files on the builder, '' = not used)."""
    bind: str
    port: int
    tls_cert: str = ""
    tls_key: str = ""
    htpasswd: str = ""
    volume: str = "lanekit-registry"

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)

    def env(self) -> dict:
        return {**(TLS_ENV if self.tls else {}), **(AUTH_ENV if self.htpasswd else {})}

    def binds(self) -> dict:
        """Target -> host file of the read-only mounts lanekit adds."""
        out = {CERT: self.tls_cert, KEY: self.tls_key} if self.tls else {}
        if self.htpasswd:
            out[HTPASSWD] = self.htpasswd
        return out

    def published_port(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"{host}:{self.port}:5000"


@dataclass
class Decision:
    action: str  # create, keep or recreate
    reasons: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    volumes: list = field(default_factory=list)
    published_ports: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"action": self.action, "recreate": self.action == "recreate", "reasons": list(self.reasons),
                "env": dict(self.env), "volumes": list(self.volumes), "published_ports": list(self.published_ports)}


def _env(container: dict) -> dict:
    out = {}
    for item in (container.get("Config") or {}).get("Env") or []:
        key, _sep, value = str(item).partition("=")
        out[key] = value
    return out


def _mounts(container: dict) -> dict:
    """Target -> (type, source, read-only) of the bind and volume mounts (a volume's source is its name)."""
    out = {}
    for mount in container.get("Mounts") or []:
        kind = mount.get("Type")
        if kind not in ("bind", "volume") or not mount.get("Destination"):
            continue
        source = mount.get("Name") if kind == "volume" else mount.get("Source")
        out[mount["Destination"]] = (kind, str(source or ""), mount.get("RW") is False)
    return out


def _ports(container: dict) -> set:
    bindings = ((container.get("HostConfig") or {}).get("PortBindings") or {}).get(PORT_KEY) or []
    return {((b.get("HostIp") or "0.0.0.0").strip("[]"), str(b.get("HostPort") or "")) for b in bindings}


def _same_file(mount: tuple[str, str, bool] | None, path: str) -> bool:
    return mount is not None and mount[0] == "bind" and os.path.normpath(mount[1]) == os.path.normpath(path)


def _refusal(name: str, host: str, env: dict, wanted: Wanted) -> str:
    does, keys = [], []
    if "REGISTRY_HTTP_TLS_CERTIFICATE" in env and not wanted.tls:
        does.append("serves TLS")
        keys += ["image_registry_tls_cert", "image_registry_tls_key"]
    if "REGISTRY_AUTH" in env and not wanted.htpasswd:
        does.append("asks for logins")
        keys.append("image_registry_htpasswd")
    if not does:
        return ""
    named = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]
    verb, them = ("is", "it") if len(keys) == 1 else ("are", "them")
    return (f"The registry container {name} on {host} {' and '.join(does)} but the inventory's {named} {verb} "
            f"empty, and lanekit does not weaken a running registry: set {them} again to the file(s) on the "
            f"builder, or, to drop this on purpose, remove the container first (docker rm -f {name} on {host}; "
            "the pushed images stay in its volume) and run again.")


def decide(container: dict | None, wanted: Wanted, *, name: str, host: str) -> Decision:
    """What to do with the registry container; ValueError (one sentence) for a refused weakening."""
    if not container:
        return Decision("create", ["there is no registry container yet"], wanted.env(),
                        [f"{wanted.volume}:{DATA_DIR}"] + [f"{src}:{dst}:ro" for dst, src in wanted.binds().items()],
                        [wanted.published_port()])
    env, mounts = _env(container), _mounts(container)
    refusal = _refusal(name, host, env, wanted)
    if refusal:
        raise ValueError(refusal)
    reasons = []
    if wanted.tls and (any(env.get(k) != v for k, v in TLS_ENV.items())
                       or not _same_file(mounts.get(CERT), wanted.tls_cert)
                       or not _same_file(mounts.get(KEY), wanted.tls_key)):
        reasons.append("TLS is added" if "REGISTRY_HTTP_TLS_CERTIFICATE" not in env
                       else "its TLS certificate or key is not the inventory's "
                            "(image_registry_tls_cert, image_registry_tls_key)")
    if wanted.htpasswd and (any(env.get(k) != v for k, v in AUTH_ENV.items())
                            or not _same_file(mounts.get(HTPASSWD), wanted.htpasswd)):
        reasons.append("htpasswd logins are added" if "REGISTRY_AUTH" not in env
                       else "its htpasswd file is not the inventory's (image_registry_htpasswd)")
    want_port = {(wanted.bind.strip("[]"), str(wanted.port))}
    have_port = _ports(container)
    if have_port != want_port:
        shown = ", ".join(sorted(f"{ip}:{port}" for ip, port in have_port)) or "nothing"
        reasons.append(f"it publishes {shown}, the inventory asks for {wanted.bind}:{wanted.port} "
                       "(image_registry_bind, image_registry_port)")
    # What lanekit does not set stays as it is: other env entries, other mounts, the data's home.
    # PATH is the image's own: carried over it would pin the old image's value in the new container.
    env_out = {k: v for k, v in env.items() if k not in OWN_ENV and k != "PATH"}
    env_out.update(wanted.env())
    data = mounts.get(DATA_DIR)
    volumes = [f"{data[1] if data else wanted.volume}:{DATA_DIR}"]
    for dst, (_kind, src, read_only) in sorted(mounts.items()):
        if dst != DATA_DIR and dst not in OWN_TARGETS and src:
            volumes.append(f"{src}:{dst}" + (":ro" if read_only else ""))
    volumes += [f"{src}:{dst}:ro" for dst, src in wanted.binds().items()]
    return Decision("recreate" if reasons else "keep", reasons, env_out, volumes, [wanted.published_port()])
