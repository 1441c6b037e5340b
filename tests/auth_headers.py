"""The header App Service Authentication puts on a signed-in caller's request
(X-MS-CLIENT-PRINCIPAL: base64 JSON of its claims), as the tests send it."""

from __future__ import annotations

import base64
import json


def principal(claims: list[tuple[str, str]]) -> str:
    doc = {
        "auth_typ": "aad",
        "role_typ": "roles",
        "claims": [{"typ": t, "val": v} for t, v in claims],
    }
    return base64.b64encode(json.dumps(doc).encode()).decode()
