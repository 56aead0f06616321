"""What makes a stage.json record damaged: one rule for the runner, `xfer status` and `xfer results`.

Torch-free (`xfer results` reads run directories without loading a model stack): the runner, which
loads torch, and `xfer.core.results` both import it. A record with a field of the wrong type is
run afresh by the runner, shown `damaged` by `xfer status`, and flagged `[damaged]` by `xfer
results`; the three used to disagree (results printed a final row), then kept two copies of the
checks.
"""

from __future__ import annotations

import json
from typing import Any

_NUMBER = (int, float)
STATE_FIELDS: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "fingerprint": (str,),
    "signature": (dict,),
    "started": _NUMBER,
    "finished": _NUMBER,
    "earlier_attempts": (list,),
    "output_files": (dict,),
    "reason": (str,),
}
ATTEMPT_FIELDS: dict[str, tuple[type, ...]] = {"started": _NUMBER, "finished": _NUMBER, "status": (str,)}


def state_problem(state: dict[str, Any]) -> str | None:
    """What is wrong with a stage.json record's fields (None: nothing)."""
    problem = field_problem(state, STATE_FIELDS, "")
    if problem is not None:
        return problem
    for index, attempt in enumerate(state.get("earlier_attempts") or []):
        where = f"earlier_attempts[{index}]"
        if not isinstance(attempt, dict):
            return f"{where} is not an object"
        problem = field_problem(attempt, ATTEMPT_FIELDS, f"{where}.", required=True)
        if problem is not None:
            return problem
    for name, digest in (state.get("output_files") or {}).items():
        if not isinstance(digest, str):
            return f"output_files[{name!r}] is not a sha256 string"
    signature = state.get("signature") or {}  # the parts `explain_change` compares, entry by entry
    for part in ("config", "components", "inputs", "upstream"):
        entries = signature.get(part, {})
        if not isinstance(entries, dict):
            return f"signature.{part} is not an object"
        if part in ("components", "inputs"):
            bad = next((key for key, entry in entries.items() if entry and not isinstance(entry, dict)), None)
            if bad is not None:
                return f"signature.{part}[{bad!r}] is not an object"
    return None


def field_problem(
    record: dict[str, Any], fields: dict[str, tuple[type, ...]], where: str, required: bool = False
) -> str | None:
    """What is wrong with the typed `fields` of `record` (None: nothing); bools are not numbers."""
    for key, types in fields.items():
        if key not in record:
            if required:
                return f"{where}{key} is missing"
            continue
        value = record[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            expected = " or ".join(t.__name__ for t in types)
            return f"{where}{key} is {type(value).__name__} {json.dumps(value)[:40]}, expected {expected}"
    return None
