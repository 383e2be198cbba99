"""Shared helpers for the image tests: a scratch image spec and a fake AnsibleModule/docker."""
from __future__ import annotations

import json
import os
import shutil

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
IMAGES = os.path.join(REPO, "images")
DIGEST = "sha256:" + "ab" * 32
OTHER_DIGEST = "sha256:" + "cd" * 32


def make_spec(images_dir, name="thin", patches=None, digests=None, **extra):
    """Write images_dir/<name>/image.yml (+ patch files); return the spec mapping written."""
    spec_dir = os.path.join(str(images_dir), name)
    os.makedirs(os.path.join(spec_dir, "patches"), exist_ok=True)
    spec = {
        "name": name,
        "upstream": {"repository": "example/engine", "tag": "v1", "digests": digests if digests is not None else {"amd64": DIGEST}},
        "entrypoint": ["engine", "serve"],
        "patches": [],
        "lanes": ["lane-a"],
    }
    for rel, text in (patches or {}).items():
        path = os.path.join(spec_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o644)
        spec["patches"].append({"file": rel})
    spec.update(extra)
    with open(os.path.join(spec_dir, "image.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(spec, handle)
    return spec


def copy_shipped(tmp_path, name):
    """A copy of a shipped image spec directory (without its lock) under tmp_path/images."""
    target = tmp_path / "images" / name
    shutil.copytree(os.path.join(IMAGES, name), target, ignore=shutil.ignore_patterns("image.lock.yml"))
    return tmp_path / "images"


class FakeModule:
    """Just enough of AnsibleModule for the docker CLI wrapper and the managers."""

    def __init__(self, params=None, check_mode=False, diff=False, responder=None):
        self.params = dict(params or {})
        self.check_mode = check_mode
        self._diff = diff
        self.warnings = []
        self.calls = []
        self.responder = responder or (lambda argv: (0, "", ""))

    def get_bin_path(self, name, required=False):
        return "/bin/true"  # any existing file: the fake never executes it

    def run_command(self, argv, data=None, environ_update=None, check_rc=False):
        self.calls.append(list(argv))
        return self.responder(list(argv))

    def warn(self, message):
        self.warnings.append(message)


class FakeEngine:
    """A docker engine in memory: images by reference, scripted build/pull/push outcomes."""

    def __init__(self, arch="amd64"):
        self.arch = arch
        self.images = {}          # ref -> inspect dict
        self.build_result = None  # callable(argv) -> (rc, out, err); default: creates the image
        self.pulls = {}           # ref -> inspect dict made available by a pull
        self.probe_failures = 0
        self.histories = {}       # ref -> `docker image history` output (newest first)

    def add(self, ref, labels=None, layers=("sha256:" + "11" * 32,), arch=None, image_id=None, repo_digests=()):
        inspect = {
            "Id": image_id or "sha256:" + format(abs(hash((ref, tuple(layers), json.dumps(labels, sort_keys=True)))), "064x")[:64],
            "Architecture": arch or self.arch,
            "RepoTags": [ref],
            "RepoDigests": list(repo_digests),
            "Config": {"Labels": dict(labels or {})},
            "RootFS": {"Type": "layers", "Layers": list(layers)},
        }
        self.images[ref] = inspect
        return inspect

    def __call__(self, argv):
        args = argv[1:]
        if args[:2] == ["image", "inspect"]:
            found = [self.images.get(ref) or next((i for i in self.images.values() if i["Id"] == ref), None)
                     for ref in args[2:]]
            if None in found:
                return 1, "[]", f"Error: No such image: {args[2 + found.index(None)]}"
            return 0, json.dumps(found), ""
        if args[:2] == ["image", "history"]:
            ref = args[-1]
            if ref not in self.histories:
                return 1, "", f"Error response from daemon: No such image: {ref}"
            return 0, self.histories[ref], ""
        if args[:1] == ["version"]:
            return 0, json.dumps({"Arch": self.arch, "Version": "20.10.24"}), ""
        if args[:2] == ["image", "pull"]:
            ref = args[2]
            if ref not in self.pulls:
                return 1, "", f"manifest for {ref} not found"
            self.images[ref] = self.pulls[ref]
            return 0, "pulled", ""
        if args[:2] == ["image", "tag"]:
            source = self.images.get(args[2]) or next(i for i in self.images.values() if i["Id"] == args[2])
            self.images[args[3]] = dict(source)
            return 0, "", ""
        if args[:2] == ["image", "ls"]:
            if "--filter" not in args:
                return 0, "\n".join(sorted({i["Id"] for i in self.images.values()})), ""
            wanted = args[-1].split("=", 1)[1]
            key, _eq, value = wanted.partition("=")
            ids = [i["Id"] for i in self.images.values() if i["Config"]["Labels"].get(key) == value]
            return 0, "\n".join(sorted(set(ids))), ""
        if args[:1] == ["build"]:
            if self.build_result:
                return self.build_result(argv)
            tag = args[args.index("--tag") + 1]
            dockerfile = open(args[args.index("--file") + 1], encoding="utf-8").read()
            labels = {}
            for line in dockerfile.splitlines():
                if line.startswith("LABEL "):
                    key, value = line[6:].split("=", 1)
                    labels[json.loads(key)] = json.loads(value)
            self.add(tag, labels=labels, layers=("sha256:" + "11" * 32, "sha256:" + "22" * 32))
            return 0, "Successfully built", ""
        if args[:1] == ["run"]:
            if self.probe_failures > 0:
                self.probe_failures -= 1
                return 127, "", "exec: stat /bin/sh: no such file or directory"
            return 0, "", ""
        return 0, "", ""
