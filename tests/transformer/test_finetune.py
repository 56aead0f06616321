"""The transformer.finetune stage end to end, its objectives and model outputs."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
import torch

from xfer.core.tasks import Answer, SentenceExample, SpanQAExample, TaggingExample, TaskInfo
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.finetune_config import PresetName
from xfer.transformer.objectives import SequenceObjective, SpanQAObjective, TaggingObjective
from xfer.transformer.presets import PRESETS, preset
from xfer.transformer.tokenization import WordPieceTokenizer

SMALL = "{num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}"

RECIPE = f"""
name: ft
seed: 4
stages:
  corpus: {{kind: toy.corpus, sentences: 300}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}}
  finetune:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {SMALL}
    max_length: 48
    trials: 2
    tasks:
      - {{name: toy/agreement, train_size: 64, dev_size: 32}}
      - {{name: toy/chunk, train_size: 64, dev_size: 32}}
    task_epochs: {{toy/chunk: 2}}
    predict: [dev, test]
    train: {{epochs: 1, batch_size: 16, lr: 1e-3, log_every: 2, precision: fp32}}
"""


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ft")
    run_recipe_file(write_recipe(root, RECIPE), root / "run", make_host(autoload=True))
    return root / "run" / "finetune"


def test_trials_results_and_outputs(finetuned: Path) -> None:
    results = json.loads((finetuned / "outputs/results/results.json").read_text())
    agreement, chunk = results["toy/agreement"], results["toy/chunk"]
    assert agreement["main_metric"] == "accuracy" and chunk["main_metric"] == "f1"
    assert [r["trial"] for r in agreement["runs"]] == [0, 1] and [r["seed"] for r in agreement["runs"]] == [4, 5]
    assert agreement["runs"][0]["steps"] == 4 and chunk["runs"][0]["steps"] == 8  # 64/16 x epochs (task_epochs)
    summary = chunk["summary"]["f1"]
    values = [r["f1"] for r in chunk["runs"]]
    assert summary["median"] == pytest.approx(sum(values) / 2) and summary["min"] == min(values)
    assert "f1" in chunk["summary"] and not {"trial", "seed", "steps"} & set(chunk["summary"]), "metrics only"
    assert 0 <= chunk["runs"][0]["f1"] <= 100 and agreement["runs"][0]["accuracy"] > 1, "metrics are percent"
    train_logs = [json.loads(x) for x in (finetuned / "metrics.jsonl").read_text().splitlines()]
    train_accuracy = [r["accuracy"] for r in train_logs if r["split"] == "train" and "accuracy" in r]
    assert train_accuracy and max(train_accuracy) > 1, "training accuracy is logged in percent like dev"
    assert (
        agreement["runs"][0]["accuracy"] != agreement["runs"][1]["accuracy"]
        or agreement["runs"][0] != agreement["runs"][1]
    )
    report = (finetuned / "report.md").read_text()
    median = chunk["summary"]["f1"]["median"]
    assert f"| finetune | toy/chunk | f1 | **{median:.1f}** |" in report  # the `xfer results` table
    model = finetuned / "outputs/models/toy-chunk"
    meta = json.loads((model / "xfer_model.json").read_text())
    assert meta["task"] == "toy/chunk" and meta["labels"][0] == "B-ADVP" and (model / "vocab.txt").exists()
    for trial in (0, 1):
        assert (finetuned / f"outputs/predictions/toy-agreement/trial-{trial}/dev.tsv").exists()
    test_files = list((finetuned / "outputs/predictions/toy-chunk/trial-0").iterdir())
    assert len(test_files) == 2, test_files  # dev.tsv + the task's test submission file


def test_finished_trials_are_not_rerun_after_interruption(finetuned: Path, tmp_path: Path) -> None:
    done = json.loads((finetuned / "trials/toy-agreement/trial-1/done.json").read_text())
    assert done["trial"] == 1 and "accuracy" in done


def test_a_damaged_trial_record_makes_the_trial_resume_from_its_checkpoints(
    finetuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty done.json (a disk that lied, a hand edit) in a stage re-run after an interruption
    stopped it with a JSONDecodeError traceback at every re-run; now the trial is taken as not
    finished: it resumes from its final checkpoint and writes the same record again."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finetuned.parent, run)
    state = json.loads((run / "finetune/stage.json").read_text())
    state.update(status="running")
    del state["finished"]
    (run / "finetune/stage.json").write_text(json.dumps(state))
    done = run / "finetune/trials/toy-agreement/trial-1/done.json"
    record = json.loads(done.read_text())
    done.write_text("")
    capsys.readouterr()
    again = run_recipe_file(write_recipe(tmp_path, RECIPE), run, make_host(autoload=True))
    assert [(s.name, s.action) for s in again.stages][-1] == ("finetune", "resumed")
    assert f"{done}: unreadable trial record; the trial runs again from its checkpoints" in capsys.readouterr().err
    assert json.loads(done.read_text()) == record


def test_saved_model_reloads_and_predicts_the_same(finetuned: Path) -> None:
    from xfer.transformer.modelio import load_model_dir

    model_dir = load_model_dir(finetuned / "outputs/models/toy-agreement")
    encoder, head = model_dir.build("encoder"), model_dir.build("head")
    assert isinstance(encoder, Encoder) and encoder.config.num_layers == 1
    tokenizer = WordPieceTokenizer.from_dir(model_dir.path)
    ids = torch.tensor([tokenizer.encode_pair("the dog runs .").input_ids])
    encoder.eval(), head.eval()
    scores = head(encoder(ids).last_hidden_state)
    assert scores.shape == (1, 2) and torch.isfinite(scores).all()


def test_chained_finetune_from_an_xfer_model_dir(finetuned: Path, tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  again:
    kind: transformer.finetune
    init: {finetuned / "outputs/models/toy-agreement"}
    tasks: [{{name: toy/agreement, train_size: 32, dev_size: 16}}]
    train: {{steps: 2, batch_size: 16, precision: fp32}}
""",
    )
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    results = json.loads((tmp_path / "run/again/outputs/results/results.json").read_text())
    assert results["toy/agreement"]["runs"][0]["steps"] == 2


def test_fine_tuning_from_a_collapsed_encoder_warns_before_training(
    finetuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `init:` encoder that maps every token to one vector (its last LayerNorm's gain zeroed: every
    output is the bias) gets a warning on stderr and in the report; the same model unharmed does not."""
    import shutil

    from safetensors.torch import load_file, save_file

    healthy = finetuned / "outputs/models/toy-agreement"
    collapsed = tmp_path / "collapsed"
    shutil.copytree(healthy, collapsed)
    weights = load_file(collapsed / "model.safetensors")
    gains = [k for k in weights if k.endswith("ffn_norm.weight")]
    last = max(gains, key=lambda k: int(k.split("layers.")[1].split(".")[0]))
    weights[last] = torch.zeros_like(weights[last])
    save_file(weights, collapsed / "model.safetensors", metadata={"format": "pt"})

    def run(init: Path, name: str) -> tuple[str, str]:
        recipe = write_recipe(
            tmp_path / name,
            f"""
stages:
  again:
    kind: transformer.finetune
    init: {init}
    tasks: [{{name: toy/agreement, train_size: 32, dev_size: 16}}]
    train: {{steps: 1, batch_size: 16, precision: fp32}}
""",
        )
        capsys.readouterr()
        run_recipe_file(recipe, tmp_path / name / "run", make_host(autoload=True))
        return capsys.readouterr().err, (tmp_path / name / "run/again/report.md").read_text()

    err, report = run(collapsed, "bad")
    assert f"warning: {collapsed}: this encoder maps every token to nearly the same vector" in err
    assert "its pre-training collapsed" in report
    err, report = run(healthy, "good")
    assert "same vector" not in err and "same vector" not in report


def test_preset_literal_matches_presets() -> None:
    assert set(typing.get_args(PresetName)) == set(PRESETS)


def _tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . who sat where ? a cat on a mat .\n" * 20)
    return WordPieceTokenizer.train([corpus], 120, min_frequency=1)


def test_regression_targets_are_scaled_and_unscaled(tmp_path: Path) -> None:
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("t", "regression", (), "spearman", extra={"score_range": (0.0, 5.0)})
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SequenceObjective(encoder, info, tokenizer, 32, None)
    features = objective.featurize(
        [SentenceExample("a", "the cat", "a mat", 5.0), SentenceExample("b", "the cat", "sat", 1.0)]
    )
    assert [f["label"] for f in features] == [1.0, 0.2]
    batch = objective.collate(features)
    objective.eval()
    with torch.no_grad():
        raw = objective.scores(batch).squeeze(-1)
        assert objective.predict(batch) == pytest.approx((raw * 5.0).tolist())


def test_regression_head_is_not_rounded_to_bfloat16_under_autocast(tmp_path: Path) -> None:
    """`precision: auto` evaluates under bf16 autocast on CPU. A head computed in bf16 rounded
    every STS-B prediction to a step of ~0.016 (x5): a little-trained model's predictions became
    one constant value and Pearson/Spearman a flat 0.0 for every trial."""
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("t", "regression", (), "spearman", extra={"score_range": (0.0, 5.0)})
    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SequenceObjective(encoder, info, tokenizer, 32, None).eval()
    with torch.no_grad():  # an early-training model: predictions spread a little around ~3.4
        objective.head.out.weight.mul_(0.1)
        objective.head.out.bias.fill_(0.68)
    texts = ["the cat", "a mat", "who sat where ?", "the cat sat on the mat", "a cat on a mat", "sat"]
    batch = objective.collate(objective.featurize([SentenceExample(t, t, None, 1.0) for t in texts]))
    with torch.no_grad():
        exact = objective.predict(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = objective.predict(batch)
            assert objective.scores(batch).dtype == torch.float32
    assert len(set(exact)) == len(texts)  # the inputs do give different scores
    assert len(set(mixed)) == len(texts), mixed
    assert mixed == pytest.approx(exact, abs=0.05)


@pytest.mark.parametrize("kind", ["tagging", "span_qa"])
def test_tagging_and_span_heads_run_in_fp32_under_autocast(tmp_path: Path, kind: str) -> None:
    """The sequence head's fp32 (above) held for one head type: tag and span logits were computed in
    bf16 under `precision: auto`, where close scores tie. Every head call (span decoding too) now
    sees fp32 hidden states with autocast off, in training and in prediction."""
    tokenizer = _tokenizer(tmp_path)
    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    if kind == "tagging":
        info = TaskInfo("tags", "tagging", ("B-X", "I-X", "O"), "f1")
        objective = TaggingObjective(encoder, info, tokenizer, 32, None)
        examples = [TaggingExample("a", ("the", "cat", "sat"), ("B-X", "I-X", "O"))]
    else:
        info = TaskInfo("squad", "span_qa", (), "f1")
        objective = SpanQAObjective(encoder, info, tokenizer, 32, None)
        context = "the cat sat on the mat ."
        examples = [SpanQAExample("q", "who sat ?", context, (Answer("the mat", context.index("the mat")),))]
    seen: list[tuple[torch.dtype, bool]] = []

    def record(hidden: torch.Tensor) -> None:
        seen.append((hidden.dtype, torch.is_autocast_enabled("cpu")))

    objective.head.register_forward_pre_hook(lambda _module, args: record(args[0]))
    if kind == "span_qa":
        decode = objective.head.decode
        objective.head.decode = lambda hidden, *rest, **named: (record(hidden), decode(hidden, *rest, **named))[1]  # type: ignore[method-assign]
    batch = objective.collate(objective.featurize(examples))
    objective.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        objective(batch)
        objective.predict(batch)
    assert seen and all(entry == (torch.float32, False) for entry in seen), seen


def test_span_qa_maps_answers_back_to_text(tmp_path: Path) -> None:
    tokenizer = _tokenizer(tmp_path)
    context = "the cat sat on the mat . " * 6
    example = SpanQAExample("q1", "who sat ?", context, (Answer("the mat", context.index("the mat")),))
    info = TaskInfo("squad", "span_qa", (), "f1")
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SpanQAObjective(encoder, info, tokenizer, 24, None)
    objective.config.doc_stride = 8
    features = objective.featurize([example])
    assert len(features) > 1, "the context must be split into several windows"
    answered = [f for f in features if f["start"] > 0]
    assert answered
    for f in answered:
        start, end = f["offsets"][f["start"]][0], f["offsets"][f["end"]][1]
        assert context[start:end] == "the mat"
    # gold spans as outputs: postprocess returns the answer text
    outputs = [(f["start"], f["end"], 10.0 if f["start"] > 0 else float("-inf"), None) for f in features]
    assert objective.postprocess([example], features, outputs) == {"q1": "the mat"}
    # SQuAD 1.1 windows without the answer point at [CLS], which is never masked (ELECTRA's code):
    # the loss is the plain NLL of [CLS] among [CLS] + context tokens, not the ~1e4 of a masked target.
    unanswered = [f for f in features if f["start"] == 0 and f["end"] == 0]
    assert unanswered and all(f["allowed"][0] == 1 for f in features)
    objective.eval()
    batch = objective.collate(features)
    with torch.no_grad():
        loss, _ = objective(batch)
        out = objective.head(objective.hidden(batch), batch["allowed"], batch["start"])
    expected = []
    for row, f in enumerate(features):
        keep = torch.tensor(f["allowed"], dtype=torch.bool)
        width = len(f["allowed"])
        for logits, gold in ((out.start_logits, f["start"]), (out.end_logits, f["end"])):
            kept = logits[row, :width].float()[keep]
            expected.append(-(kept.log_softmax(-1)[int(keep[:gold].sum())]))
    assert loss.item() == pytest.approx(torch.stack(expected).mean().item(), rel=1e-5)
    assert loss.item() < 20


def test_a_random_init_encoder_is_sized_by_a_tokenizer_larger_than_its_preset(tmp_path: Path) -> None:
    """Random init takes the tokenizer's size before the "tokenizer has more tokens than the encoder
    has embeddings" check: a 31,000-token vocabulary (past the presets' 30,522) was refused though
    nothing fixed the size; and the exported model records the tokenizer's [PAD] id."""
    import json

    from xfer.transformer.testing import TINY_ENCODER

    words = [f"w{i}" for i in range(31000 - 5)]
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text(
        "\n".join(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n"
    )
    recipe = f"""
stages:
  fit:
    kind: transformer.finetune
    tokenizer: tok
    encoder: {TINY_ENCODER}
    max_length: 16
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8, precision: fp32}}
"""
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    model = tmp_path / "run" / "fit" / "outputs" / "models" / "toy-agreement" / "xfer_model.json"
    config = json.loads(model.read_text())["modules"]["encoder"]["config"]
    assert (config["vocab_size"], config["pad_token_id"]) == (31000, 1)
