"""Write schemas/*.schema.json from the pydantic models (run by ``make schemas``)."""

from __future__ import annotations

import json

from core.models import SCHEMA_MODELS
from core.validation import generated_schema, schema_path

for name in SCHEMA_MODELS:
    schema_path(name).write_text(json.dumps(generated_schema(name), indent=2) + "\n")
    print("wrote", schema_path(name))
