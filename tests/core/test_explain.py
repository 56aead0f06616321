"""`xfer explain` is documentation: it must read as English and say what each stage does."""

from __future__ import annotations

import re

import pytest

from xfer.core.cli import main
from xfer.core.schema import plural, type_name
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
