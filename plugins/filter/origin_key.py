# Copyright: lanekit developers
# Apache-2.0
"""The filter origin_key: a relay node's key for the builder's signature of the image archive, the
HMAC-SHA256 of the node's name under the run's origin secret (module_utils/_image/_relay.origin_key,
which image_serve uses to sign, is the one definition)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_key as _origin_key
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import StreamError


def origin_key(secret: str, name: str) -> str:
    try:
        return _origin_key(str(secret or ""), str(name))
    except StreamError as err:
        raise AnsibleFilterError(f"origin_key: {err}") from None


class FilterModule:
    def filters(self) -> dict:
        return {"origin_key": origin_key}
