"""A recipe can give translation the opt-in `full` auxiliary decoder (thesis 4.3.1)."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open

from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.testing import make_host, run_recipe_file, write_recipe

MT = "{name: mt/parallel, data_dir: mt, source_lang: en, target_lang: xx}"


def test_translation_trains_with_a_full_view_decoder(tmp_path: Path) -> None:
    """`seq2seq_views: [..., full]` was refused by the recipe schema, so the decoder that sees the whole
    source with the students' dropout could not be asked for."""
    write_tiny_data(tmp_path)
    recipe = tiny_cvt_recipe(MT, steps=4, extra="    seq2seq_views: [attention_dropout, future, full]")
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    results = json.loads((tmp_path / "run/fit/outputs/results/results.json").read_text(encoding="utf-8"))
    assert results["mt/parallel"]["runs"][0]["steps"] == 4
    weights = [
        name
        for file in (tmp_path / "run/fit/outputs/model").rglob("*.safetensors")
        for name in safe_open(file, "pt").keys()  # noqa: SIM118 (a safe_open handle, not a dict)
    ]
    assert any(".aux.full." in name for name in weights), sorted(weights)[:20]
