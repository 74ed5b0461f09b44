"""Seeds the service under test: SESSIONS sessions of ITEMS ~200-byte items each."""

import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

base, sessions, items = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = json.dumps(
    {"items": [{"role": "user", "content": "x" * 170} for _ in range(items)]}
).encode()


def seed(n: int) -> None:
    request = urllib.request.Request(
        f"{base}/v1/sessions/bench-{n}/items",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 201, response.status


with ThreadPoolExecutor(8) as pool:
    list(pool.map(seed, range(1, sessions + 1)))
