#!/usr/bin/env python3
# Copyright: lanekit developers
# Apache-2.0
"""http_json.py CAPTURE_DIR: turn capture.sh's http/NAME.{meta,headers,body} into CAPTURE_DIR/http.json.

Each exchange: request (from notes.txt), status, seconds, the headers of interest and the body
(parsed JSON, or the text: SSE streams stay text)."""
from __future__ import annotations

import json
import os
import sys

KEEP = ("content-type", "content-length", "server", "www-authenticate", "x-request-id", "transfer-encoding")


def main(capture: str) -> int:
    http = os.path.join(capture, "http")
    requests = {}
    with open(os.path.join(capture, "notes.txt"), encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                requests[parts[0]] = parts[1]
    out = []
    for name in sorted({n.rsplit(".", 1)[0] for n in os.listdir(http)}, key=lambda n: list(requests).index(n)
                       if n in requests else 999):
        with open(os.path.join(http, name + ".meta"), encoding="utf-8") as handle:
            meta = handle.read().split()
        headers = {}
        path = os.path.join(http, name + ".headers")
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        if key.strip().lower() in KEEP:
                            headers[key.strip().lower()] = value.strip()
        body_path = os.path.join(http, name + ".body")
        text = open(body_path, encoding="utf-8", errors="replace").read() if os.path.exists(body_path) else ""
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        if name == "metrics" and isinstance(body, str):
            lines = body.splitlines()
            names = {ln.split("{")[0].split(" ")[0] for ln in lines if ln.startswith("vllm:")}
            body = {"lines": len(lines), "vllm_metric_names": sorted(names)}
        status = int(meta[-2]) if len(meta) >= 2 and meta[-2].isdigit() else meta
        out.append({"name": name, "request": requests.get(name, ""), "status": status,
                    "seconds": float(meta[-1]) if meta else None, "headers": headers, "body": body})
    with open(os.path.join(capture, "http.json"), "w", encoding="utf-8") as handle:
        json.dump(out, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    print(f"{capture}/http.json: {len(out)} exchanges")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
