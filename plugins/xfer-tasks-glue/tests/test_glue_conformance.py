"""Every GLUE task (and the recipe-defined glue/tsv task) passes the xfer.testing conformance
checks inside a real fine-tuning recipe, on tiny GLUE-format folders written from each task's
own file layout (so a layout change is exercised here too)."""

from __future__ import annotations

import random
from pathlib import Path

from xfer.tasks.glue.benchmark import GLUE_SPECS, GlueSpec
from xfer.testing import ComponentConformance
from xfer.testing.helpers import make_host
from xfer.transformer.testing import tiny_finetune_recipe

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "big", "small", "red", "near", "house"]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) + " ."


def _label(spec: GlueSpec, rng: random.Random) -> str:
    return f"{rng.uniform(*spec.score_range):.2f}" if spec.score_range else rng.choice(spec.labels)


def write_glue_folder(spec: GlueSpec, folder: Path, seed: int) -> None:
    """Train and dev files in the task's layout: named header columns, or CoLA's headerless rows."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    layout = spec.layout
    for split, n in (("train", 48), ("dev", 16)):
        if layout.header:
            columns = [c for c in (layout.index, layout.text_a, layout.text_b, layout.label) if c is not None]
            rows = ["\t".join(map(str, columns))]
            for i in range(n):
                values = {layout.index: str(i), layout.text_a: _sentence(rng), layout.label: _label(spec, rng)}
                if layout.text_b is not None:
                    values[layout.text_b] = _sentence(rng)
                rows.append("\t".join(values[c] for c in columns))
        else:
            rows = []
            for _ in range(n):
                cells = ["src", "", "", ""][: layout.width]
                cells[layout.label], cells[layout.text_a] = _label(spec, rng), _sentence(rng)
                rows.append("\t".join(cells))
        (folder / spec.files[split]).write_text("\n".join(rows) + "\n")


_RESUME_CHECKED: dict[tuple[bool, bool, bool], str] = {}
"""One kill-and-resume check per file-layout family (header?, sentence pair?, regression?): the
resume itself is the trainer's and the data order the reader's, shared within a family."""


def _conformance_class(spec: GlueSpec) -> type:
    def prepare(self, directory: Path) -> None:
        write_glue_folder(spec, directory / spec.folder, seed=len(spec.key))

    task = f"{{name: glue/{spec.key}, data_dir: {spec.folder}}}"
    attributes = {
        "component": ("task", f"glue/{spec.key}"),
        "config_path": "stages.fit.tasks.0",
        "recipe": tiny_finetune_recipe(task),
        "prepare": prepare,
        "__doc__": f"Conformance of glue/{spec.key}.",
    }
    name = "Test" + "".join(part.capitalize() for part in spec.key.split("-")) + "Conformance"
    family = (spec.layout.header, spec.layout.text_b is not None, spec.score_range is not None)
    attributes["resume_covered_by"] = _RESUME_CHECKED.get(family)
    _RESUME_CHECKED.setdefault(family, name)
    return type(name, (ComponentConformance,), attributes)


for _spec in GLUE_SPECS.values():
    _cls = _conformance_class(_spec)
    globals()[_cls.__name__] = _cls


class TestTsvRegressionConformance(ComponentConformance):
    component = ("task", "glue/tsv")
    config_path = "stages.fit.tasks.0"
    recipe = tiny_finetune_recipe(
        "{name: glue/tsv, train: train.tsv, dev: dev.tsv, type: regression, header: false, "
        "text_a_column: 0, label_column: 1, metrics: [pearson, spearman], main_metric: spearman}"
    )

    def prepare(self, directory: Path) -> None:
        rng = random.Random(1)
        for split, n in (("train", 48), ("dev", 16)):
            rows = [f"{_sentence(rng)}\t{rng.uniform(0, 5):.2f}" for _ in range(n)]
            (directory / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def test_every_registered_glue_task_has_a_conformance_class() -> None:
    """A task added to the plugin without a conformance class fails here."""
    registered = {
        n for n in make_host(["xfer.tasks.glue.plugin"], autoload=False).names("task") if n.startswith("glue/")
    }
    classes = [c for c in globals().values() if isinstance(c, type) and issubclass(c, ComponentConformance)]
    tested = {c.component[1] for c in classes if c is not ComponentConformance}
    assert registered and registered <= tested, sorted(registered - tested)
