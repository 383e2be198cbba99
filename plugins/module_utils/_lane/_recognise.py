# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Which kind of node this is, beyond what nvidia-smi and rocminfo say: TPU chips, Intel GPUs, Ascend NPUs and
the CPU generation, for the hardware profiles that declare ``recognition`` (``_hardware_taxonomy``).

One job: read node_facts' raw readings (``/proc/cpuinfo``, the PCI functions under ``/sys/bus/pci/devices``,
the names under ``/dev``) into a small summary, and say whether a summary matches a profile's recognition.
Pure: node_facts does the reading; tests feed text.

A recognition is ``{"profile": id, "kind": ..., "what": "<the kind for people>", ...}``:

- ``nvidia``: ``gpu_names``, the names nvidia-smi may print for the profile (several editions of one card);
- ``tpu`` / ``xpu``: a PCI function of ``pci_vendor`` whose class starts with ``pci_class`` (and, for ``xpu``,
  bound to ``driver``);
- ``npu``: device nodes ``devices`` and at least one ``numbered`` node (``/dev/davinci<N>``);
- ``cpu``: ``cpu_vendor``, ``cpu_family`` and one of ``cpu_models`` in /proc/cpuinfo.
"""
from __future__ import annotations

# PCI classes kept in the summary: display controllers (GPUs) and processing accelerators (TPU chips).
KEPT_PCI_CLASSES = ("0x03", "0x12")


def parse_cpuinfo(text: str) -> dict:
    """The first processor of ``/proc/cpuinfo``: vendor, family, model (integers when readable) and name."""
    fields: dict = {}
    for line in (text or "").splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough: a node has one CPU model
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())

    def number(name: str) -> int | None:
        value = fields.get(name, "")
        return int(value) if value.isdigit() else None

    return {"vendor": fields.get("vendor_id", ""), "family": number("cpu family"), "model": number("model"),
            "model_name": fields.get("model name", "")}


def pci_summary(functions: list[dict]) -> list[dict]:
    """The PCI functions that can be accelerators ({vendor, device, class, driver}, ids as sysfs writes them,
    0x-prefixed hex), display controllers and processing accelerators only, in address order."""
    kept = []
    for entry in functions:
        klass = str(entry.get("class") or "").lower()
        if klass.startswith(KEPT_PCI_CLASSES):
            kept.append({key: str(entry.get(key) or "").lower() for key in ("vendor", "device", "class", "driver")})
    return kept


def node_summary(cpuinfo: str, pci: list[dict], dev_names: list[str]) -> dict:
    """What the preflight compares with a recognition: the CPU, the accelerator-class PCI functions and the
    accelerator device nodes under /dev (vfio, accel*, davinci*)."""
    nodes = sorted(n for n in dev_names if n == "vfio" or n.startswith(("accel", "davinci", "devmm_svm", "hisi_hdc")))
    return {"cpu": parse_cpuinfo(cpuinfo), "pci": pci_summary(pci), "dev": nodes}


def _numbered(names: list[str], prefix: str) -> int:
    base = prefix.rsplit("/", 1)[-1]
    return sum(1 for n in names if n.startswith(base) and n[len(base):].isdigit())


def found(recognition: dict, node: dict) -> int:
    """How many of the recognised devices the node has (CPU: 1 when its CPU is of the generation, else 0)."""
    kind = recognition.get("kind")
    node = node or {}
    if kind in ("tpu", "xpu"):
        return sum(1 for f in node.get("pci") or [] if f.get("vendor") == recognition.get("pci_vendor")
                   and str(f.get("class", "")).startswith(recognition.get("pci_class", ""))
                   and (not recognition.get("driver") or f.get("driver") == recognition["driver"]))
    if kind == "npu":
        names = [str(n) for n in node.get("dev") or []]
        needed = [d.rsplit("/", 1)[-1] for d in recognition.get("devices") or []]
        return _numbered(names, recognition.get("numbered", "")) if all(n in names for n in needed) else 0
    if kind == "cpu":
        cpu = node.get("cpu") or {}
        return int(cpu.get("vendor") == recognition.get("cpu_vendor") and cpu.get("family") == recognition.get("cpu_family")
                   and cpu.get("model") in (recognition.get("cpu_models") or []))
    return 0


def reported(recognition: dict, node: dict) -> str:
    """What the node showed of the recognised kind, for the refusal's sentence."""
    kind = recognition.get("kind")
    node = node or {}
    if kind == "cpu":
        cpu = node.get("cpu") or {}
        return (f"CPU '{cpu.get('model_name') or 'unknown'}' ({cpu.get('vendor') or '?'} family {cpu.get('family')}, "
                f"model {cpu.get('model')})")
    if kind == "npu":
        return f"device nodes {', '.join(node.get('dev') or []) or 'none of /dev/davinci*'}"
    functions = [f"{f.get('vendor')}:{f.get('device')} class {f.get('class')} ({f.get('driver') or 'no driver'})"
                 for f in node.get("pci") or []]
    return f"accelerator-class PCI functions {', '.join(functions) if functions else 'none'}"


def recognition_mismatch(recognition: dict, node: dict | None) -> str:
    """'' when the node is of the recognised kind, else what it reports and what the profile needs (a clause)."""
    if node is None:
        return (f"it did not report its CPU and PCI devices (an older node_facts), so it cannot be recognised as "
                f"{recognition.get('what')}")
    if found(recognition, node):
        return ""
    return f"it reports {reported(recognition, node)}, not {recognition.get('what')}"
