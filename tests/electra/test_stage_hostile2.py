"""`electra.pretrain` around its training loop, as a careless or hostile user meets it, continued:
`xfer validate --data` on a local `dataset:` whose lines the stage refuses when it starts, or on `encoder:`
overrides the `init:` checkpoint contradicts; a map-style JSON-lines dataset with nulls parsed whole at
every start; a FLOP budget that read the `init:` weights; a collapse warning without replaced tokens."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError, check_data
from xfer.electra import data as electra_data
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.testing import make_host, write_recipe

from .electra_recipes import TINY

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "big", "red", "hello", "said"]
LINES = [" ".join(WORDS[i : i + 3 + i % 4]) for i in range(9)]

RECIPE = f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  fit:
    kind: electra.pretrain
    corpus: {{dataset: corpus.jsonl, streaming: true}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {TINY}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
"""


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xfer.transformer.tokenization import WordPieceTokenizer

    root = tmp_path_factory.mktemp("hostile2-vocab")
    text = root / "train.txt"
    text.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) + "\n")
    WordPieceTokenizer.train([text], vocab_size=80).save(root / "vocab")
    return root / "vocab"


def host():
    return make_host(autoload=True)


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"txt": "the dog ran"}, r"corpus\.jsonl:6: text: no 'text' key \(keys: 'txt'\)"),
        ('{"text": "the cat"', r"corpus\.jsonl:6: not valid JSON at column 19"),
        ({"text": 7}, r"corpus\.jsonl:6: text: expected text, got int"),
    ],
)
def test_validate_data_reports_the_dataset_lines_the_stage_refuses(
    tmp_path: Path, bad: object, message: str, streaming: bool
) -> None:
    """`xfer validate --data` (and `xfer run` before any stage trains) said ok to a local JSON-lines
    `dataset:` with a row without the text key, a bad line or a number: the stage refused it when it
    started, after the stages before it had run. The pre-flight runs the stage's own checks."""
    lines = [json.dumps({"text": line}) for line in LINES]
    lines.insert(5, bad if isinstance(bad, str) else json.dumps(bad))
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    text = RECIPE if streaming else RECIPE.replace(", streaming: true", "")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(PreflightError, match=message):
        check_data(recipe, host())
    write_jsonl(tmp_path / "corpus.jsonl", [{"text": line} for line in LINES] + [{"text": None}])
    check_data(recipe, host())  # a null is an empty row (a document end): fine


def test_a_map_style_json_lines_dataset_with_nulls_is_not_parsed_again(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A map-style JSON-lines dataset with legitimate nulls (`"text": null`, a document end) was parsed
    whole, a line at a time, at every stage start and every resume, as a stream's file is not: it is
    recorded once passed, by its identity, and any write makes it checked anew."""
    records = [{"text": line} for line in LINES[:4]] + [{"text": None}] + [{"text": x} for x in LINES[4:]]
    data = write_jsonl(tmp_path / "corpus.jsonl", records)
    os.utime(data, (1_000_000_000, 1_000_000_000))  # not modified just now (a racy write is never recorded)

    def build() -> object:
        corpus = CorpusConfig(dataset=str(data))
        return build_examples(corpus, [], vocab, 12, tmp_path / "cache", seed=3, short_seq_prob=0.0)

    first = [r["input_ids"] for r in build()]
    calls: list[Path] = []
    real = electra_data._json_lines_problem
    monkeypatch.setattr(electra_data, "_json_lines_problem", lambda p, *a: calls.append(p) or real(p, *a))
    assert [r["input_ids"] for r in build()] == first
    assert calls == []
    write_jsonl(data, [*records, {"body": "x"}])
    with pytest.raises(DataError, match=r"corpus\.jsonl:11: text: no 'text' key"):
        build()


def checkpoint(vocab: Path, folder: Path, layout: str) -> Path:
    """A random 64-wide, one-layer encoder with `vocab`'s tokenizer, as an xfer model dir or an HF folder."""
    from xfer.transformer.encoder import Encoder, EncoderConfig
    from xfer.transformer.hf import export_hf
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.tokenization import WordPieceTokenizer

    config = EncoderConfig(
        vocab_size=80, embedding_size=32, hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128
    )
    tokenizer = WordPieceTokenizer.from_dir(vocab)
    if layout == "xfer":
        save_model_dir(folder, {"encoder": Encoder(config)})
        tokenizer.save(folder)
    else:
        tokenizer.save_hf(folder, config.max_position_embeddings)
        export_hf(folder, Encoder(config), vocab_file=folder / "vocab.txt")
    return folder


@pytest.mark.parametrize("layout", ["xfer", "hf"])
def test_validate_data_reports_an_encoder_override_the_init_checkpoint_contradicts(
    vocab: Path, tmp_path: Path, layout: str
) -> None:
    """`encoder: {hidden_size: 32}` on a 64-wide `init:` checkpoint: `xfer validate --data` said ok, and the
    stage refused it only when it read the checkpoint, after the stages before it had trained. The
    pre-flight runs the stage's own check (`with_overrides`); overrides that are no architecture pass."""
    folder = checkpoint(vocab, tmp_path / "checkpoint", layout)
    text = f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    init: {folder}
    encoder: {{hidden_size: 32, hidden_dropout: 0.0}}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
"""
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(
        PreflightError, match=r"encoder\.hidden_size: 32 differs from the init checkpoint's 64 \("
    ) as caught:
        check_data(recipe, host())
    assert str(folder) in str(caught.value)
    check_data(load_recipe(write_recipe(tmp_path, text.replace("hidden_size: 32, ", "")), host=host()), host())


def test_no_detection_collapse_is_reported_for_logs_without_a_replaced_token() -> None:
    """A log window in which the generator reproduced every masked token has nothing to detect: AUC is
    the placeholder 50 and the entropy of a replaced fraction of 0 is ~0, so any loss "stayed at" it and
    a discriminator right about every token was warned about as collapsed. A real collapse still is."""
    from xfer.electra.stage import detection_collapse

    nothing = [
        {"step": s, "main_loss": 0.02, "replaced": 0.0, "disc_auc": 50.0, "gen_loss": 0.3, "token_spread": 0.5}
        for s in (10, 20, 30)
    ]
    assert detection_collapse(nothing, unigram_entropy=4.0) is None
    collapsed = [{**row, "main_loss": 0.42, "replaced": 15.0, "disc_auc": 51.0} for row in nothing]
    assert "collapsed" in (detection_collapse(collapsed, unigram_entropy=4.0) or "")


@pytest.mark.parametrize("layout", ["xfer", "hf"])
def test_a_damaged_init_checkpoint_is_one_problem_next_to_a_flops_budget(
    vocab: Path, tmp_path: Path, layout: str
) -> None:
    """With `budget: {flops: ...}` the pre-flight costed a step by loading the `init:` checkpoint's weights
    (GBs for a large model, in `xfer validate`), and a damaged weights file was reported twice: by the
    checkpoint check and again from the budget's. The budget reads the checkpoint's description only."""
    folder = checkpoint(vocab, tmp_path / "checkpoint", layout)
    text = f"""
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: {tmp_path / "corpus.txt"}}}
    init: {folder}
    max_length: 32
    budget: {{flops: 1.0}}
    train: {{steps: null, batch_size: 8, warmup_steps: 0}}
"""
    (tmp_path / "corpus.txt").write_text("\n".join(LINES) + "\n")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(PreflightError, match=r"budget\.flops 1 is less than one training step") as caught:
        check_data(recipe, host())  # the budget is still checked against the checkpoint's model
    assert len(caught.value.diagnostics) == 1
    recipe = load_recipe(write_recipe(tmp_path, text.replace("flops: 1.0", "flops: 1.0e12")), host=host())
    check_data(recipe, host())  # a budget that buys steps
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(PreflightError, match=r"model\.safetensors: cannot read") as caught:
        check_data(recipe, host())
    assert len(caught.value.diagnostics) == 1, caught.value


def test_the_pre_flights_check_of_a_streamed_file_is_not_redone_by_the_stage_with_a_data_cache(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `data_cache:` (a folder that exists) the pre-flight records the file it parsed there, as the
    stage does: the stage, reading the same record, does not parse it a second time."""
    data = write_jsonl(tmp_path / "corpus.jsonl", [{"text": line} for line in LINES])
    os.utime(data, (1_000_000_000, 1_000_000_000))  # not modified just now (a racy write is never recorded)
    (tmp_path / "cache").mkdir()
    text = RECIPE.replace("    max_length: 32\n", f"    max_length: 32\n    data_cache: {tmp_path / 'cache'}\n")
    check_data(load_recipe(write_recipe(tmp_path, text), host=host()), host())
    calls: list[Path] = []
    real = electra_data._json_lines_problem
    monkeypatch.setattr(electra_data, "_json_lines_problem", lambda p, *a: calls.append(p) or real(p, *a))
    corpus = CorpusConfig(dataset=str(data), streaming=True)
    build_examples(corpus, [], vocab, 12, tmp_path / "cache", seed=3)
    assert calls == []


def test_validate_data_reports_a_ragged_row_of_a_streamed_tsv_file(tmp_path: Path) -> None:
    """A streamed .tsv is parsed by the stage before training (a row with another field count than the
    header is an error with its line): the pre-flight says so too, before the stages ahead of it run."""
    (tmp_path / "corpus.tsv").write_text("text\n" + "\n".join(LINES) + "\nthe cat\tsat\n")
    text = RECIPE.replace("corpus.jsonl", "corpus.tsv")
    with pytest.raises(PreflightError, match=r"corpus\.tsv:11: 2 fields where the header line has 1"):
        check_data(load_recipe(write_recipe(tmp_path, text), host=host()), host())
