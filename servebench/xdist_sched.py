"""xdist scheduling: every case of one profile goes to one worker, so it gets one allocation there.

Case ids end in ``[<profile id>-c<concurrency>]``; the scope of such a case is its profile id. Other tests
keep xdist's own grouping (their ``@group`` suffix, else their module).
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadGroupScheduling

CASE = re.compile(r"\[(?P<profile>[^\[\]]+)-c\d+\](?:@.*)?$")


class ProfileScheduling(LoadGroupScheduling):
    def _split_scope(self, nodeid: str) -> str:
        match = CASE.search(nodeid)
        return f"profile:{match['profile']}" if match else super()._split_scope(nodeid)
