"""The cvt.train stage end to end: conformance (incl. SIGKILL + resume with the unlabeled cursor),
recipe validation errors, outputs, and what each mode's vocabulary contains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import RecipeError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.runner import run_recipe
from xfer.core.specs import ComponentSpec
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.tasks.conll.config import UdParseConfig
from xfer.tasks.conll.parsing import UdParseTask
from xfer.testing import ComponentConformance, make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
PARSE = "{name: conll/ud-parse, train_file: train.conllu, dev_file: dev.conllu}"
MT = "{name: mt/parallel, data_dir: mt, source_lang: en, target_lang: xx}"
UNLABELED_LINE = "    unlabeled: {files: [unlabeled.txt], chunk_lines: 16, pool_batches: 2}\n"


class TestCvtStageConformance(ComponentConformance):
    """CVT on a tagging task with unlabeled text: the SIGKILL-and-resume check covers the labeled
    and unlabeled cursors (the kill lands between checkpoints, mid-pool). PackedSequence LSTMs
    (the CUDA path; on CPU PyTorch's native kernels) spare the subprocesses oneDNN's per-shape
    kernel compilation; the padded path is resumed in-process below."""

    component = ("stage", "cvt.train")
    config_path = "stages.fit"
    recipe = tiny_cvt_recipe(CHUNK, extra="    lstm: packed")

    def prepare(self, directory: Path) -> None:
        write_tiny_data(directory)


MULTI = tiny_cvt_recipe(CHUNK, PARSE, MT, steps=6, extra="    parse_decoding: mst")


@pytest.fixture(scope="module")
def multitask(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted multi-task run (tagging + parsing + translation): its run directory."""
    directory = tmp_path_factory.mktemp("multi")
    write_tiny_data(directory)
    run_recipe_file(write_recipe(directory, MULTI), directory / "run", make_host(autoload=True))
    return directory


def test_multitask_run_resumes_exactly_after_an_interruption(multitask, monkeypatch):
    """Every module kind's teacher, students and beam search, interrupted after its step-3
    checkpoint and resumed: the same weights as the uninterrupted run."""
    from xfer.core.trainer import Trainer
    from xfer.testing import assert_same_weights, output_tensors

    original = Trainer._train_step

    def interrupted(self: Trainer) -> None:
        if self.step == 5:
            raise KeyboardInterrupt("simulated interruption")
        original(self)

    recipe = multitask / "recipe.yaml"
    monkeypatch.setattr(Trainer, "_train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, multitask / "cut", make_host(autoload=True))
    monkeypatch.setattr(Trainer, "_train_step", original)
    result = run_recipe_file(recipe, multitask / "cut", make_host(autoload=True))
    assert [s.action for s in result.stages] == ["resumed"]
    assert_same_weights(output_tensors(multitask / "run", "fit"), output_tensors(multitask / "cut", "fit"))


def test_multitask_outputs(multitask):
    from xfer.transformer.modelio import load_model_dir

    run = multitask / "run" / "fit" / "outputs"
    results = json.loads((run / "results" / "results.json").read_text())
    assert list(results) == ["conll/chunking", "conll/ud-parse", "mt/parallel", "all tasks"]
    assert [results[t]["main_metric"] for t in results] == ["f1", "las", "bleu", "mean"]
    assert {"f1", "precision", "recall"} <= set(results["conll/chunking"]["summary"])
    assert {"las", "uas"} <= set(results["conll/ud-parse"]["runs"][0])
    assert results["mt/parallel"]["runs"][0]["bleu_signature"].startswith("nrefs:1|")
    assert results["all tasks"]["runs"][0]["trial"] == 0
    model = load_model_dir(run / "model")
    assert model.modules["cvt"]["type"] == "CvtObjective"
    assert set(model.meta["cvt"]["tasks"]) == {"conll/chunking", "conll/ud-parse", "mt/parallel"}
    assert (run / "model" / "vocab.json").exists() and (run / "model" / "targets-mt-parallel.json").exists()
    predictions = run / "predictions"
    assert (predictions / "conll-ud-parse" / "trial-0" / "dev.conllu").exists()
    assert (predictions / "mt-parallel" / "trial-0" / "dev.xx").read_text().count("\n") == 12
    dev = [json.loads(line) for line in (multitask / "run" / "fit" / "metrics.jsonl").read_text().splitlines()]
    assert any(r["split"] == "dev" and "mean" in r for r in dev)


def recipe_errors(tmp_path: Path, text: str) -> str:
    write_tiny_data(tmp_path)
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    return str(caught.value)


def test_recipe_mistakes_are_reported_with_their_lines(tmp_path):
    text = tiny_cvt_recipe(CHUNK, extra="    sizes: {lstm3: 10}\n    tagging_views: [fwd, future, fwdd]")
    errors = recipe_errors(tmp_path, text.replace("mode: cvt", "mode: cvtt"))
    assert "mode: 'cvtt'" in errors or "cvtt" in errors
    assert "unknown size 'lstm3'; did you mean 'lstm" in errors
    assert "fwdd" in errors
    lines = text.splitlines()
    mode_line = next(i for i, line in enumerate(lines, 1) if "mode:" in line)
    assert f"recipe.yaml:{mode_line}:" in errors


@pytest.mark.parametrize(
    "features", ["{tokenizer: unlabeled.txt}", "{finetune: true, layer: 2}", "{init: null, combine: replace}"]
)
def test_features_knobs_without_a_transformer_are_refused(tmp_path, features):
    """They were silently ignored: the model trained on word + char inputs alone."""
    errors = recipe_errors(tmp_path, tiny_cvt_recipe(CHUNK, extra=f"    features: {features}"))
    assert "only used with features.init (the Transformer to read features from), which is null" in errors
    assert "stages.fit.features." in errors


def test_word_vectors_given_as_the_transformer_are_refused(tmp_path):
    """`features.init: vectors.vectors` passed validation and failed after the vectors stage had run."""
    extra = "    features: {init: vectors.vectors}\n    vocab: {vectors: vectors.vectors}"
    text = tiny_cvt_recipe(CHUNK, extra=extra) + "  vectors: {kind: cvt.vectors, files: unlabeled.txt}\n"
    errors = recipe_errors(tmp_path, text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "features:" in row)
    assert errors.count("recipe.yaml:") == 1, errors  # vocab.vectors takes the same output
    assert (
        f"recipe.yaml:{line}:22: stages.fit.features.init: vectors.vectors is vectors; features.init takes a model"
    ) in errors


def test_vectors_of_lowercased_words_with_a_cased_vocabulary_are_refused(tmp_path):
    """cvt.vectors keys lower-cased words; a cased vocabulary started every capitalised word random."""
    extra = "    vocab: {vectors: vectors.vectors, lowercase: false}"
    text = tiny_cvt_recipe(CHUNK, extra=extra) + "  vectors: {kind: cvt.vectors, files: unlabeled.txt, dim: 16}\n"
    errors = recipe_errors(tmp_path, text)
    assert "stages.fit.vocab.lowercase" in errors and "writes vectors of lower-cased words" in errors
    # cased vectors meet a lower-casing vocabulary: both sides key them lower-cased, so that is fine
    cased = text.replace("lowercase: false", "lowercase: true").replace("dim: 16}", "dim: 16, lowercase: false}")
    load_recipe(write_recipe(tmp_path, cased), host=make_host(autoload=True))


def test_unlabeled_text_of_blank_lines_is_named(tmp_path):
    write_tiny_data(tmp_path)
    (tmp_path / "unlabeled.txt").write_text("\n  \n\n")
    with pytest.raises(UserError, match=r"the unlabeled text contains no words \(only blank lines\): .*unlabeled\.txt"):
        run_recipe_file(
            write_recipe(tmp_path, tiny_cvt_recipe(CHUNK)), tmp_path / "run", make_host(autoload=True), preflight=False
        )


def test_semi_supervised_modes_need_unlabeled_files(tmp_path):
    text = tiny_cvt_recipe(CHUNK).replace(UNLABELED_LINE, "")
    assert "set unlabeled.files or unlabeled.task_sentences" in recipe_errors(tmp_path, text)
    empty = tiny_cvt_recipe(CHUNK).replace(UNLABELED_LINE, "    unlabeled: {files: []}\n")
    assert "unlabeled.files: give at least one file, glob or stage output" in recipe_errors(tmp_path, empty)
    load_recipe(write_recipe(tmp_path, text.replace("mode: cvt", "mode: supervised")), host=make_host(autoload=True))


def test_task_sentences_are_read_as_unlabeled_text(tmp_path):
    """Every training sentence, the labeled tenth included, feeds the unlabeled stream (the
    vocabulary, built from what each mode learns from, shows the left-out sentences' words)."""
    write_tiny_data(tmp_path)
    with open(tmp_path / "chunk-train.txt", "a", encoding="utf-8") as f:
        f.write("\n".join(f"{w} NN B-NP" for w in ["zebras", "graze", "quietly"]) + "\n\n")
    sentences = (tmp_path / "chunk-train.txt").read_text().strip().split("\n\n")
    text = tiny_cvt_recipe(CHUNK, steps=2, extra="    labeled_fraction: 0.1").replace(
        UNLABELED_LINE, "    unlabeled: {task_sentences: true, chunk_lines: 16, pool_batches: 2}\n"
    )
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))
    written = (tmp_path / "run" / "fit" / "unlabeled-task-sentences.txt").read_text().splitlines()
    assert written == [" ".join(line.split()[0] for line in s.splitlines()) for s in sentences]
    assert written[-1] == "zebras graze quietly"
    vocab = json.loads((tmp_path / "run" / "fit" / "outputs" / "model" / "vocab.json").read_text())
    assert "zebras" in vocab["words"]


def test_task_sentences_do_not_hide_a_mistyped_unlabeled_glob(tmp_path):
    text = tiny_cvt_recipe(CHUNK, steps=1).replace(
        UNLABELED_LINE, "    unlabeled: {files: [unlabled/*.txt], task_sentences: true}\n"
    )
    errors = recipe_errors(tmp_path, text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "unlabled" in t)
    assert f"recipe.yaml:{line}:" in errors and "unlabeled.files.0: no file matches 'unlabled/*.txt'" in errors


def test_raising_trials_keeps_the_finished_trials_and_anything_else_starts_afresh(tmp_path):
    write_tiny_data(tmp_path)
    host, logged = make_host(autoload=True), []
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, steps=2))
    trial_0 = tmp_path / "run" / "fit" / "trials" / "trial-0" / "done.json"

    def run(*overrides: str) -> list[dict]:
        run_recipe(
            load_recipe(recipe, list(overrides), host), tmp_path / "run", host=host, force=True, log=logged.append
        )
        results = json.loads((tmp_path / "run" / "fit" / "outputs" / "results" / "results.json").read_text())
        return results["conll/chunking"]["runs"]

    assert [r["seed"] for r in run()] == [1]
    first = trial_0.read_text()
    trial_0.write_text(first.replace('"seed": 1', '"seed": 1, "marker": "kept"'))  # re-read, not re-run
    runs = run("stages.fit.trials=2")
    assert [r["seed"] for r in runs] == [1, 2] and runs[0]["marker"] == "kept"
    assert "[fit] resumes with more trials: what it finished is kept" in logged
    runs = run("stages.fit.trials=3", "stages.fit.train.steps=3")  # more trials and another change
    assert [r["seed"] for r in runs] == [1, 2, 3] and "marker" not in runs[0]
    run("stages.fit.trials=1", "stages.fit.train.steps=3")  # fewer trials: afresh too
    assert not (tmp_path / "run" / "fit" / "trials" / "trial-1").exists()


def test_seeds_run_apart_pool_into_the_rows_one_run_of_more_trials_makes(tmp_path, capsys):
    """Trial k trains with seed `seed + k` and nothing else, so `seed=2` in a second run reproduces
    trial 1 of a two-trial run exactly: that is what makes `A+B` pooling in the results table sound."""
    from xfer.cvt.results import main

    write_tiny_data(tmp_path)
    host = make_host(autoload=True)
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, steps=2))

    def run(name: str, *overrides: str) -> list[dict]:
        run_recipe(load_recipe(recipe, list(overrides), host), tmp_path / name, host=host)
        results = json.loads((tmp_path / name / "fit" / "outputs" / "results" / "results.json").read_text())
        return [{k: v for k, v in r.items() if k != "seconds"} for r in results["conll/chunking"]["runs"]]

    together = run("together", "stages.fit.trials=2")
    first, later = run("first"), run("later", "seed=2")
    assert [r["seed"] for r in together] == [1, 2]
    assert first[0] == together[0] and {**later[0], "trial": 1} == together[1]
    capsys.readouterr()
    assert main([f"{tmp_path / 'first'}+{tmp_path / 'later'}"]) == 0
    out = capsys.readouterr().out.splitlines()
    per_trial = " / ".join(f"{r['f1']:.1f}" for r in together)
    assert out[2].startswith("| first+later/fit | conll/chunking f1 |") and f"| {per_trial} | 2 |" in out[2]
    assert out[-1].endswith("; same config")
    assert main([f"{tmp_path / 'together'}+{tmp_path / 'later'}"]) == 2
    assert "seed 2 of conll/chunking is also in" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["cvt", "supervised"])
def test_epochs_instead_of_steps_is_refused_in_every_mode(tmp_path, mode):
    """The message said "alternates data sources" also in mode supervised, which has one source."""
    text = tiny_cvt_recipe(CHUNK, mode=mode).replace("train: {steps: 8,", "train: {epochs: 2,")
    errors = recipe_errors(tmp_path, text)
    assert "stages.fit.train.steps" in errors and "cvt.train counts training in steps, not epochs" in errors
    assert "alternates" not in errors


def test_char_sum_needs_matching_sizes(tmp_path):
    text = tiny_cvt_recipe(CHUNK, extra="    sizes: {char_combine: sum, word_dim: 20, char_filters: 8}")
    assert "word_dim (20) must equal char_filters x len(char_widths) (8 x 3)" in recipe_errors(tmp_path, text)


def test_wrong_task_type_is_refused(tmp_path):
    write_tiny_data(tmp_path)
    (tmp_path / "lines.jsonl").write_text('{"id": "1", "text": "a b", "label": "x"}\n')
    text = tiny_cvt_recipe("{name: example/jsonl, labels: [x, y], train_file: lines.jsonl, dev_file: lines.jsonl}")
    with pytest.raises(UserError, match=r"cvt\.train trains tagging, parsing and seq2seq tasks"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))


def test_mode_cvt_without_views_of_a_task_type_is_refused_before_any_stage_runs(tmp_path):
    """`tagging_views: []` in mode cvt crashed in the first step (an empty stack of view losses)."""
    from xfer.core.runs.preflight import PreflightError, check_data

    write_tiny_data(tmp_path)
    host = make_host(autoload=True)
    text = tiny_cvt_recipe(CHUNK, PARSE, extra="    tagging_views: []")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host)
    with pytest.raises(PreflightError) as caught:
        check_data(recipe, host)
    (problem,) = caught.value.diagnostics
    assert "conll/chunking is a tagging task and tagging_views is empty" in problem.message
    check_data(load_recipe(write_recipe(tmp_path, text.replace("mode: cvt", "mode: supervised")), host=host), host)


class UnlabelledParseTask(UdParseTask):
    """conll/ud-parse without a relation set: the Task contract allows an empty `labels` for
    parsing (unlabelled parsing), but cvt.train's parser needs one."""

    @property
    def labels(self):
        return ()


class UnlabelledParsePlugin:
    @staticmethod
    @hookimpl
    def xfer_tasks():
        return [ComponentSpec("task", "mem/unlabelled-parse", f"{__name__}:UnlabelledParseTask", "1", UdParseConfig)]


@pytest.mark.parametrize("mode", ["cvt", "supervised"])
def test_a_parsing_task_without_a_relation_set_is_refused_before_any_stage_runs(tmp_path, mode):
    """Training failed in `prepare` with a bare KeyError on the first relation ('det')."""
    from xfer.core.runs.preflight import PreflightError, check_data

    write_tiny_data(tmp_path)
    host = make_host(autoload=True)
    host.add_object(UnlabelledParsePlugin, "mem")
    task = "{name: mem/unlabelled-parse, train_file: train.conllu, dev_file: dev.conllu}"
    recipe = load_recipe(write_recipe(tmp_path, tiny_cvt_recipe(task, mode=mode)), host=host)
    with pytest.raises(PreflightError) as caught:
        check_data(recipe, host)
    (problem,) = caught.value.diagnostics
    assert problem.message == (
        "stage 'fit': mem/unlabelled-parse is a parsing task without a relation set (its labels is empty): "
        "cvt.train's parser predicts every arc's relation from the task's relation set, so it cannot train "
        "unlabelled parsing; use a task that lists its relations in labels"
    )
    check_data(load_recipe(write_recipe(tmp_path, tiny_cvt_recipe(PARSE, mode=mode)), host=host), host)
    with pytest.raises(UserError, match="without a relation set"):  # run without pre-flight: the stage checks too
        run_recipe(recipe, tmp_path / "run", host=host, log=lambda *a, **k: None)


def test_vocabulary_follows_the_data_each_mode_learns_from(tmp_path):
    write_tiny_data(tmp_path)
    with open(tmp_path / "unlabeled.txt", "a", encoding="utf-8") as f:
        f.write("zebras graze quietly .\n")
    vocabularies = {}
    for mode in ("supervised", "cvt"):
        recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, mode=mode, steps=1))
        run_recipe_file(recipe, tmp_path / mode, make_host(autoload=True))
        vocabularies[mode] = json.loads((tmp_path / mode / "fit" / "outputs" / "model" / "vocab.json").read_text())
    assert "zebras" in vocabularies["cvt"]["words"] and "zebras" not in vocabularies["supervised"]["words"]
    assert "z" in vocabularies["cvt"]["chars"]


def test_results_table_lists_each_task_main_metric(multitask, capsys):
    from xfer.cvt.results import main

    assert main([str(multitask / "run" / "fit")]) == 0
    table = capsys.readouterr().out.splitlines()
    rows = [line for line in table if line.startswith("| run/fit ")]
    assert [row.split("|")[2].strip() for row in rows] == [
        "conll/chunking f1",
        "conll/ud-parse las",
        "mt/parallel bleu",
        "all tasks mean",
    ]
    assert rows[0].split("|")[3].strip() == "**" + rows[0].split("|")[5].strip() + "**"  # one trial: no "± 0.0"


def test_results_table_refuses_a_path_that_is_no_stage(multitask, capsys):
    from xfer.cvt.results import main

    assert main([str(multitask / "run" / "fit"), str(multitask / "run" / "fitt")]) == 2
    assert "run/fitt: not a stage directory (no stage.json) nor a run directory" in capsys.readouterr().err
    assert main([str(multitask / "run")]) == 0  # a run directory: its cvt.train stages
    assert capsys.readouterr().out.splitlines()[2].startswith("| run/fit | conll/chunking f1 |")


def test_results_table_shows_the_finished_trials_of_a_running_stage(multitask, tmp_path, capsys):
    """A stage without results.json yet (still running) lists the trials it has finished."""
    import shutil

    from xfer.core.results import RESULTS_FILE
    from xfer.cvt.results import main

    running = tmp_path / "live" / "fit"
    shutil.copytree(multitask / "run" / "fit", running)
    (running / RESULTS_FILE).unlink()
    assert main([str(running)]) == 0
    done = json.loads((running / "trials" / "trial-0" / "done.json").read_text())
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith("| live/fit | (not finished) conll/chunking/f1 |")
    assert f"| {done['conll/chunking/f1']:.1f} | 1 so far |" in row
    shutil.rmtree(running / "trials" / "trial-0")
    assert main([str(running)]) == 0
    assert "no trial finished yet" in capsys.readouterr().out


def test_results_curve_counts_labeled_minibatches(multitask, capsys):
    """Mode cvt alternates labeled and unlabeled minibatches: dev at step s is at s/2 labeled ones."""
    from xfer.cvt.results import main

    stage = multitask / "run" / "fit"
    dev = [json.loads(line) for line in (stage / "metrics.jsonl").read_text().splitlines()]
    dev = [row for row in dev if row["split"] == "dev"]
    assert main(["--curve", str(stage)]) == 0
    header, _, *rows = capsys.readouterr().out.splitlines()
    assert header.split("|")[2:-1] == [f" {row['step'] // 2} " for row in dev]
    assert [row.split("|")[1].strip() for row in rows] == [
        "run/fit conll/chunking/f1",
        "run/fit conll/ud-parse/las",
        "run/fit mt/parallel/bleu",
    ]
    assert rows[1].split("|")[2:-1] == [f" {row['conll/ud-parse/las']:.1f} " for row in dev]
    assert main(["--curve", "--metric", "uas", str(stage)]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| run/fit conll/ud-parse/uas |")
    assert main(["--curve", "--metric", "f2", str(stage)]) == 2
    assert "no dev metric 'f2'" in capsys.readouterr().err


def test_results_follow_the_shared_layout(multitask):
    """`xfer results` (xfer.core.results) reads the stage's results: one row per task."""
    from xfer.core.results import results_table

    table = results_table([multitask / "run"])
    assert table is not None
    assert [row.split("|")[2].strip() for row in table.splitlines()[2:]] == [
        "conll/chunking",
        "conll/ud-parse",
        "mt/parallel",
        "all tasks",
    ]


# --- the Task contract at stage time (a stage run without pre-flight) ---------------------------


def load_mem_task(kind, labels, **data):
    """`load_tasks` on one in-memory task of `kind` whose `examples(split)` returns `data[split]`."""
    from types import SimpleNamespace

    from xfer.core.config import TaskRef
    from xfer.core.tasks import Task
    from xfer.cvt.stage import load_tasks

    class MemTask(Task):
        type = kind
        main_metric = "score"

        @property
        def labels(self):
            return labels

        def examples(self, split):
            return data[split]

        def evaluate(self, examples, predictions):
            return {"score": 0.0}

    from xfer.cvt.config import CvtConfig

    ctx = SimpleNamespace(host=SimpleNamespace(load=lambda component, name: MemTask))
    config = SimpleNamespace(tasks=[TaskRef("mem/task")], mode="supervised")
    config.check_task_infos = lambda infos: CvtConfig.check_task_infos(config, infos)  # the real checks
    return load_tasks(ctx, config)


WORDS = ("a", "b")


def test_load_tasks_checks_the_task_contract():
    """cvt.train read examples with `task.examples` and checked only their class: duplicate ids or a
    training relation outside the relation set (a KeyError in the relation index) went through."""
    from xfer.core.tasks import ParsingExample, TaggingExample, TaskContractError

    tags = [TaggingExample("s1", WORDS, ("B", "O")), TaggingExample("s1", WORDS, ("O", "O"))]
    with pytest.raises(
        TaskContractError, match=r"^task 'mem/task' \(train\): examples #1 and #2 have the same id 's1'"
    ):
        load_mem_task("tagging", ("B", "O"), train=tags, dev=tags[:1])
    with pytest.raises(TaskContractError, match=r"^task 'mem/task' \(dev\): examples #1 and #2 have the same id 's1'"):
        load_mem_task("tagging", ("B", "O"), train=tags[:1], dev=tags)
    tree = ParsingExample("t1", WORDS, (2, 0), ("obj", "root"))
    with pytest.raises(
        TaskContractError,
        match=r"^task 'mem/task' \(train\): example 't1' has relation 'obj' \(word 1\), not one of its labels",
    ):
        load_mem_task("parsing", ("nsubj", "root"), train=[tree], dev=[tree])


def test_load_tasks_refuses_examples_of_the_wrong_class_by_the_contract():
    """The ad-hoc class check ("a tagging task must yield TaggingExamples") is check_examples' now:
    same information, plus which split and example."""
    from xfer.core.tasks import TaggingExample, TaskContractError

    good = [TaggingExample("s1", WORDS, ("B", "O"))]
    with pytest.raises(
        TaskContractError,
        match=r"^task 'mem/task' \(dev\): example #1 is a dict, not a TaggingExample \(what a tagging task's",
    ):
        load_mem_task("tagging", ("B", "O"), train=good, dev=[{"id": "d1", "words": WORDS}])


def test_load_tasks_refuses_an_empty_training_set():
    from xfer.core.tasks import TaggingExample

    with pytest.raises(UserError, match=r"^mem/task: the training set is empty$"):
        load_mem_task("tagging", ("B", "O"), train=[], dev=[TaggingExample("d1", WORDS, ("B", "O"))])


def test_load_tasks_warns_of_dev_tags_and_relations_unseen_in_training():
    """As pre-flight does: a dev tag or relation outside the training set is a miss, not an error."""
    from xfer.core.tasks import ParsingExample, TaggingExample, UnseenTagsWarning

    with pytest.warns(UnseenTagsWarning, match=r"\(dev\): 1 gold tag not in the training tag set, first 'B-MISC'"):
        (data,) = load_mem_task(
            "tagging", ("B", "O"), train=[TaggingExample("t1", WORDS, ("B", "O"))],
            dev=[TaggingExample("d1", WORDS, ("B-MISC", "O"))],
        )  # fmt: skip
    assert [e.id for e in data.dev] == ["d1"]
    with pytest.warns(UnseenTagsWarning, match=r"\(dev\): 1 gold relation not in the training relation set"):
        load_mem_task(
            "parsing", ("nsubj", "root"), train=[ParsingExample("t1", WORDS, (2, 0), ("nsubj", "root"))],
            dev=[ParsingExample("d1", WORDS, (2, 0), ("nsubj:pass", "root"))],
        )  # fmt: skip


def test_load_tasks_still_refuses_a_sentence_without_words():
    """Not part of the Task contract (an empty sentence is a valid TaggingExample), so cvt keeps it."""
    from xfer.core.tasks import TaggingExample

    good = [TaggingExample("t1", WORDS, ("B", "O"))]
    with pytest.raises(UserError, match=r"^mem/task: dev sentence 'd1' has no words$"):
        load_mem_task("tagging", ("B", "O"), train=good, dev=[TaggingExample("d1", (), ())])
