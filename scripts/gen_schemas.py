"""Write core/schemas/*.schema.json from the pydantic models (run by ``make schemas``)."""

from __future__ import annotations

import json
from pathlib import Path

from core.models import SCHEMA_MODELS
from core.validation import generated_schema

SCHEMAS = Path(__file__).resolve().parents[1] / "core" / "schemas"

for name in SCHEMA_MODELS:
    path = SCHEMAS / f"{name}.schema.json"
    path.write_text(json.dumps(generated_schema(name), indent=2) + "\n")
    print("wrote", path)
