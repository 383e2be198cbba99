# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one HTTP opener for requests that may carry the lane's API key.

One job: go straight to the address asked, and nowhere else. No proxy from the environment (the
lane's own addresses), and no redirect: urllib's default handler follows a 301/302/303/307/308
and sends the request's headers, the ``Authorization`` header among them, to whatever address
the answer names, so a process answering on the API port (or anything it points to) could
collect the key that way. A redirect is an HTTP error here, named by its status code.
"""
from __future__ import annotations

import urllib.request
from typing import IO, Any


class _RefuseRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        # None makes urllib raise HTTPError(code) instead of following.
        return None


def direct_opener() -> urllib.request.OpenerDirector:
    """An opener with no proxy and no redirect (see the module doc)."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _RefuseRedirect())
