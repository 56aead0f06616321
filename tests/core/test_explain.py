"""`xfer explain` is documentation: it must read as English and say what each stage does."""

from __future__ import annotations

import re

import pytest

from xfer.core.cli import main
from xfer.core.recipes.schema import plural, type_name
from xfer.testing import make_host

HOST = make_host(autoload=True)
STAGES = HOST.names("stage")


def test_type_names_read_as_english() -> None:
    from xfer.core.config import Files, TaskRef

    assert type_name(list[str]) == "a list of strings"
    assert type_name(dict[str, bool | int | float]) == "a mapping to booleans or integers or numbers"
    assert type_name(list[TaskRef]) == "a list of task names or mappings with 'name'"
    assert type_name(Files) == "a file pattern or a list of them"
    assert plural("an objective name or a mapping with 'name'") == "objective names or mappings with 'name'"


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_explains_itself(stage: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "stage", stage]) == 0
    text = capsys.readouterr().out
    description = text.split("\n\n")[0].splitlines()[1:]  # the summary under the heading
    assert description and len(" ".join(description).split()) >= 5, f"{stage} has no real description:\n{text}"
    assert "see the module docstring" not in text
    for wrong in (r"\ba [aeiou]\w+ name\b", r"'\w+'s\b", r"\btrues\b", r"\ba mapping of\b"):
        assert not re.search(wrong, text), f"{stage}: {wrong!r} in:\n{text}"


def test_grown_keys_only_when_a_growable_key_grew_and_nothing_else_changed() -> None:
    from xfer.core.runs.fingerprint import grown_keys

    old = {"config": {"trials": 1, "lr": 0.1, "steps": [1, 2]}, "seed": 1, "inputs": {}}
    assert grown_keys(old, {**old, "config": {"trials": 3, "lr": 0.1, "steps": (1, 2)}}, ("trials",)) == ["trials"]
    assert grown_keys(old, {**old, "config": {"trials": 3, "lr": 0.2, "steps": [1, 2]}}, ("trials",)) == []
    assert grown_keys(old, {**old, "seed": 2, "config": {**old["config"], "trials": 3}}, ("trials",)) == []
    assert grown_keys(old, {**old, "config": {**old["config"], "trials": 0}}, ("trials",)) == []
    assert grown_keys(old, {**old, "config": {**old["config"], "trials": 3}}, ()) == []
    assert grown_keys(None, old, ("trials",)) == []


def test_explain_says_at_which_value_a_knob_is_left_out_of_fingerprints() -> None:
    import dataclasses

    from xfer.core.cli import describe_fields
    from xfer.core.config import knob

    @dataclasses.dataclass
    class WithNewKnob:
        size: int = knob(3, "How many.")
        lowercase: bool = knob(False, "Lower-case the text.", unsigned_at=False)

    assert describe_fields(WithNewKnob) == [
        "size: an integer = 3  # How many.",
        "lowercase: true or false = false  # Lower-case the text. (unsigned at false: runs made before this knob "
        "existed stay fresh)",
    ]
