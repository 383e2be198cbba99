"""Make the checkout importable as ansible_collections.lanekit.serving for unit tests."""
from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "lanekit", "serving")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink("../../..", LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
