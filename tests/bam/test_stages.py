"""bam.teachers and bam.student end to end on tiny data: outputs, annealing, no teacher passes, the cache."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from xfer.core import cli
from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host, run_recipe_file, write_recipe

from .bam_recipes import ENCODER, STUDENTS, prepare, recipe


def _results(stage: Path) -> dict:
    return json.loads((stage / "outputs/results/results.json").read_text())


def test_outputs_of_teachers_and_students(bam_run: Path) -> None:
    for stage in ("teachers", "student", "multi"):
        results = _results(bam_run / stage)
        assert list(results) == ["toy/agreement", "toy/chunk", "glue/tsv"]
        assert results["glue/tsv"]["main_metric"] == "spearman" and results["toy/chunk"]["main_metric"] == "f1"
        for task, result in results.items():
            assert [r["seed"] for r in result["runs"]] == [3, 4][: 1 if stage == "multi" else 2], "seeds seed, seed+1"
            assert set(result["summary"]) >= {result["main_metric"]} and "seed" not in result["summary"]
            dev = bam_run / stage / "outputs/results/dev" / task.replace("/", "-")
            gold = json.loads((dev / "gold.json").read_text())
            for trial in range(len(result["runs"])):
                assert len(json.loads((dev / f"trial-{trial}.json").read_text())["predictions"]) == len(gold["ids"])
        index = json.loads((bam_run / stage / "outputs/predictions/index.json").read_text())["tasks"]
        assert set(index) == set(results)
        for entry in index.values():
            assert (bam_run / stage / "outputs/predictions" / entry["file"]).is_file()
        models = json.loads((bam_run / stage / "outputs/models/models.json").read_text())["tasks"]
        assert set(models) == set(results)
    # teachers: one model per task; the multi-task student: one model for all
    assert len(set(json.loads((bam_run / "teachers/outputs/models/models.json").read_text())["tasks"].values())) == 3
    assert set(json.loads((bam_run / "student/outputs/models/models.json").read_text())["tasks"].values()) == {
        "multitask"
    }
    assert (bam_run / "teachers/outputs/init/xfer_model.json").is_file()
    assert "| **average** |" in (bam_run / "student/report.md").read_text()


def test_students_anneal_lambda_and_multi_uses_gold_only(bam_run: Path) -> None:
    def lambdas(stage: str) -> list[float]:
        records = [json.loads(line) for line in (bam_run / stage / "metrics.jsonl").read_text().splitlines()]
        return [
            r["gold_weight"] for r in records if r["split"] == "train" and r.get("trial") == 0 and "gold_weight" in r
        ]

    annealed = lambdas("student")
    assert annealed[0] < 0.1 and annealed == sorted(annealed) and 0.8 < annealed[-1] < 1.0  # means over 2 steps
    assert lambdas("multi") == [] and lambdas("teachers") == [], "gold labels only: no lambda to log"


def test_distillation_changes_training(bam_run: Path) -> None:
    from safetensors.torch import load_file

    a = load_file(str(bam_run / "student/outputs/models/multitask/model.safetensors"))
    b = load_file(str(bam_run / "multi/outputs/models/multitask/model.safetensors"))
    assert any(not torch.equal(a[k], b[k]) for k in a), "teacher targets must reach the loss"


def test_a_student_never_runs_a_teacher(bam_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every teacher model and checkpoint deleted, the student trains to the same result,
    and nothing it loads is a teacher model: it reads cached predictions only."""
    run = tmp_path / "run"
    skip = shutil.ignore_patterns("trials", "student", "plots")  # every checkpoint goes, then the teachers' models
    shutil.copytree(bam_run, run, ignore=skip)
    shutil.rmtree(run / "teachers/outputs/models")
    from xfer.transformer import modelio

    loaded: list[Path] = []
    original = modelio.load_model_dir

    def recording(path: Path) -> object:
        loaded.append(Path(path).resolve())
        return original(path)

    monkeypatch.setattr(modelio, "load_model_dir", recording)
    recipe_file = bam_run.parent / "recipe.yaml"
    result = run_recipe_file(recipe_file, run, make_host(autoload=True))
    assert {s.name: s.action for s in result.stages if s.action != "skipped"} == {"student": "ran"}
    assert _results(run / "student") == _results(bam_run / "student")
    assert loaded and all(p == (run / "teachers/outputs/init").resolve() for p in loaded), loaded


def test_init_from_a_models_output_restores_each_tasks_head(bam_run: Path) -> None:
    from safetensors.torch import load_file

    from xfer.bam.weights import InitialWeights

    student = bam_run / "student/outputs/models"
    weights = InitialWeights(
        encoder_config=None, per_task={"toy/chunk": student / "multitask", "glue/tsv": student / "multitask"}
    )
    encoder, heads = weights.for_tasks(["toy/chunk"])
    saved = load_file(str(student / "multitask/model.safetensors"))
    assert torch.equal(encoder["layers.0.qkv.weight"], saved["encoder.layers.0.qkv.weight"])
    assert set(heads) == {"toy/chunk"} and torch.equal(
        heads["toy/chunk"]["out.weight"], saved["head-toy-chunk.out.weight"]
    )
    teachers = bam_run / "teachers/outputs/models"
    split = InitialWeights(encoder_config=None, per_task={"a": teachers / "toy-chunk", "b": teachers / "glue-tsv"})
    with pytest.raises(Exception, match="different models"):
        split.for_tasks(["a", "b"])


def test_compare_prints_the_table_and_writes_a_plot(
    bam_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = [
        "compare",
        f"Single={bam_run / 'teachers'}",
        f"Multi={bam_run / 'multi'}",
        f"S2M={bam_run / 'student'}",
        "--baseline",
        "Single",
        "Multi",
        "--bootstrap",
        "200",
        "--out",
        str(tmp_path / "cmp"),
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "| system | Avg | toy/agreement | toy/chunk | glue/tsv |" in out
    assert "| average | S2M | Single |" in out and "| glue/tsv | S2M | Multi |" in out
    saved = json.loads((tmp_path / "cmp/compare.json").read_text())
    assert len(saved["tests"]) == 8 and all(0 < t["p"] <= 1 and t["p"] <= t["p_holm"] <= 1 for t in saved["tests"])
    assert (tmp_path / "cmp/compare.png").stat().st_size > 1000
    assert cli.main(["compare", str(tmp_path / "nothing")]) == 2


def test_compare_of_a_run_folder_follows_the_recipe_and_one_system_is_noted(
    bam_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Alphabetical order made `multi` the default baseline of a run folder (teachers, in the
    recipe, come first), and a single system printed an empty table without a word."""
    assert cli.main(["compare", str(bam_run), "--no-plot", "--bootstrap", "100", "--out", str(tmp_path / "c")]) == 0
    rows = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[1:4] == ["teachers", "student", "multi"], rows
    saved = json.loads((tmp_path / "c/compare.json").read_text())
    assert saved["baselines"] == ["teachers"]
    assert cli.main(["compare", str(bam_run / "multi"), "--no-plot", "--out", str(tmp_path / "d")]) == 0
    assert "note: one system (multi): its medians only, no tests" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["toy/chunk"]["runs"][0].pop("f1"), r"results.json: toy/chunk.runs\[0\]: no 'f1'"),
        (lambda r: r["toy/chunk"]["runs"][0].update(f1="90"), r"toy/chunk.runs\[0\].f1: expected int or float"),
        (lambda r: r["toy/chunk"].update(runs=[]), "toy/chunk: no runs recorded"),
        (lambda r: r["toy/chunk"]["runs"][0].update(trial=7), "trial-7.json: unreadable"),
        (lambda r: r["toy/chunk"]["runs"][0].update(f1=12.5), "resampling metric gives"),
    ],
)
def test_compare_names_the_file_and_key_of_an_edited_results_file(
    bam_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture, edit, message: str
) -> None:
    import re

    stage = tmp_path / "multi"
    shutil.copytree(bam_run / "multi", stage, ignore=shutil.ignore_patterns("trials"))
    results = _results(stage)
    edit(results)
    (stage / "outputs/results/results.json").write_text(json.dumps(results))
    compare = ["compare", f"T={bam_run / 'teachers'}", f"M={stage}", "--no-plot", "--out", str(tmp_path / "c")]
    assert cli.main(compare) == 2
    assert "was modified after the stage completed" in capsys.readouterr().err, "an edit is stale first"
    # the same content vouched for by stage.json (a plugin that wrote it so): its values are checked
    record = json.loads((stage / "stage.json").read_text())
    digest = hashlib.sha256((stage / "outputs/results/results.json").read_bytes()).hexdigest()
    record["output_files"]["results/results.json"] = digest
    (stage / "stage.json").write_text(json.dumps(record))
    assert cli.main(compare) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "c").exists(), "nothing is written after an error"


def test_compare_refuses_a_system_given_twice_and_an_out_that_is_a_file(
    bam_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    teachers, multi = bam_run / "teachers", bam_run / "multi"
    out = ["--no-plot", "--out", str(tmp_path / "c")]
    assert cli.main(["compare", f"A={teachers}", f"A={multi}", *out]) == 2
    assert "system name 'A' is given twice" in capsys.readouterr().err
    assert cli.main(["compare", str(teachers), f"{teachers}/", *out]) == 2
    assert "the same stage is given twice" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert cli.main(["compare", str(teachers), str(multi), "--no-plot", "--out", str(tmp_path / "file")]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


CACHED_TEACHERS = """
name: cached
seed: 3
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {encoder}
    max_length: 40
    cache_dir: {cache}
    tasks: [{{name: toy/agreement, train_size: 32, dev_size: 16}}]
    train: {{steps: 2, batch_size: 16, lr: {lr}, eval_every: null, precision: fp32}}
"""


def test_teacher_predictions_are_reused_until_the_teacher_changes(tmp_path: Path) -> None:
    host = make_host(autoload=True)
    cache = tmp_path / "cache"

    def run(name: str, lr: str) -> dict:
        text = CACHED_TEACHERS.format(encoder=ENCODER, cache=cache, lr=lr)
        run_recipe_file(write_recipe(tmp_path / name, text), tmp_path / name / "run", host)
        return json.loads((tmp_path / name / "run/teachers/outputs/predictions/index.json").read_text())["tasks"]

    first = run("a", "2e-3")["toy/agreement"]
    assert not first["reused"]
    again = run("b", "2e-3")["toy/agreement"]  # another run, the same teacher: served from the shared cache
    assert again["reused"] and again["key"] == first["key"]
    changed = run("c", "1e-3")["toy/agreement"]  # a different teacher
    assert not changed["reused"] and changed["key"] != first["key"]
    assert len(list(cache.glob("*.safetensors"))) == 2
    # the shared cache is where the stage writes, not one of its inputs: run c's entry (and run a's
    # own) made run a's teachers stale, so every `xfer run` trained them again
    text = CACHED_TEACHERS.format(encoder=ENCODER, cache=cache, lr="2e-3")
    again = run_recipe_file(write_recipe(tmp_path / "a", text), tmp_path / "a" / "run", host)
    assert {s.name: s.action for s in again.stages}["teachers"] == "skipped"


def test_a_cache_dir_that_is_a_file_is_a_recipe_error(tmp_path: Path) -> None:
    """It was a FileExistsError traceback once the teachers had trained and their predictions were written."""
    (tmp_path / "cache").write_text("")
    text = CACHED_TEACHERS.format(encoder=ENCODER, cache=tmp_path / "cache", lr="2e-3")
    with pytest.raises(RecipeError, match=r":12:16: stages.teachers.cache_dir: .*cache is a file; give a folder"):
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))


STUDENT_VARIANTS = """
  single_single:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    multitask: false
    mixing: batch
    max_length: 40
    tasks: {TASKS}
    train: {TRAIN}
  finetune_after_multi:
    kind: bam.teachers
    init: student.models
    max_length: 40
    tasks: {TASKS}
    train: {TRAIN}
  multi_multi:
    kind: bam.student
    init: teachers.init
    teachers: multi.predictions
    lambda_schedule: constant
    lambda_value: 0.5
    max_length: 40
    tasks: {TASKS}
    train: {TRAIN}
"""


def test_every_variant_is_a_recipe(tmp_path: Path) -> None:
    """Single->Single, Multi->Multi, S->M->S->M and fine-tuning after multi-task training validate."""
    from xfer.core.recipes.recipe import load_recipe

    s2m2s2m = """
  s2m2s:
    kind: bam.student
    init: teachers.init
    teachers: student.predictions
    multitask: false
    tasks: {TASKS}
  s2m2s2m:
    kind: bam.student
    init: teachers.init
    teachers: s2m2s.predictions
    tasks: {TASKS}
"""
    path = prepare(tmp_path, recipe(STUDENTS + STUDENT_VARIANTS + s2m2s2m))
    plan = load_recipe(path, host=make_host(autoload=True))
    assert list(plan.stages)[-4:] == ["finetune_after_multi", "multi_multi", "s2m2s", "s2m2s2m"]


def test_compare_system_names_may_hold_equals_signs(tmp_path: Path) -> None:
    from xfer.bam.compare import _split_spec

    (tmp_path / "l0").mkdir()
    assert _split_spec(f"BAM lambda=0={tmp_path / 'l0'}") == ("BAM lambda=0", "=", tmp_path / "l0")
    assert _split_spec(f"BAM={tmp_path / 'l0'}") == ("BAM", "=", tmp_path / "l0")
    assert _split_spec(str(tmp_path / "l0")) == ("", "", tmp_path / "l0")
    assert _split_spec("A=missing") == ("A", "=", Path("missing"))  # reported as a missing folder later


def test_teachers_from_a_collapsed_encoder_warn_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `init:` encoder that maps every token to one vector (its last LayerNorm's gain zeroed) is
    named on stderr and in the report before the teachers train; the same encoder unharmed is not."""
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.presets import preset
    from xfer.transformer.tokenization import WordPieceTokenizer

    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog runs . the dogs run . a cat sleeps . cats sleep .\n" * 20)
    tokenizer = WordPieceTokenizer.train([corpus], 120, min_frequency=1)
    torch.manual_seed(0)
    encoder = Encoder(
        preset(
            "tiny",
            vocab_size=tokenizer.vocab_size,
            num_layers=1,
            hidden_size=32,
            embedding_size=32,
            intermediate_size=64,
            num_heads=2,
        )
    )

    def run(name: str) -> str:
        folder = save_model_dir(tmp_path / name / "model", {"encoder": encoder})
        tokenizer.save(folder)
        text = f"""
stages:
  teachers:
    kind: bam.teachers
    init: {folder}
    max_length: 32
    trials: 1
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8, precision: fp32}}
"""
        capsys.readouterr()
        run_recipe_file(write_recipe(tmp_path / name, text), tmp_path / name / "run", make_host(autoload=True))
        err = capsys.readouterr().err
        return err + (tmp_path / name / "run/teachers/report.md").read_text()

    assert "same vector" not in run("healthy")
    with torch.no_grad():
        encoder.layers[-1].ffn_norm.weight.zero_()
    out = run("collapsed")
    assert (
        f"warning: {tmp_path / 'collapsed' / 'model'}: this encoder maps every token to nearly the same vector" in out
    )
    assert "## Warning" in out
