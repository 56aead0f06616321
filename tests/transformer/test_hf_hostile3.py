"""Hostile cases for HF export/import and xfer model directories, part 3: tokenizer files of an
earlier export beside new weights (and a cased tokenizer exported as lower-casing), encoder
tensors missing from an xfer model dir, description files with wrongly typed values or bytes that
are not UTF-8, extra tensors over the model's own, and folders replaced while they are read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.transformer.encoder import Encoder
from xfer.transformer.hf import export_hf, load_hf
from xfer.transformer.modelio import read_encoder, save_model_dir
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import SPECIAL_TOKENS, WordPieceTokenizer

TOKENIZER_FILES = {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}


def tiny_encoder(seed: int = 0, **overrides: Any) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16, **overrides)).eval()


def tokenizer(*words: str) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate([*SPECIAL_TOKENS, *words])})


def _first_export_with_tokenizer(folder: Path) -> None:
    """An export as the fine-tuning and pre-training stages write it: tokenizer first, then weights."""
    tokenizer("old", "words").save_hf(folder, 16)
    (folder / "special_tokens_map.json").write_text("{}")  # as transformers' save_pretrained adds it
    export_hf(folder, tiny_encoder(0), vocab_file=folder / "vocab.txt")
    assert {p.name for p in folder.iterdir()} >= TOKENIZER_FILES


def test_an_export_without_a_tokenizer_removes_the_earlier_exports_tokenizer(tmp_path: Path) -> None:
    """The old tokenizer stayed beside the new weights: AutoTokenizer loaded it without a word."""
    _first_export_with_tokenizer(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    export_hf(tmp_path, tiny_encoder(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors", "notes.txt"]
    _, state, _ = load_hf(tmp_path)
    assert torch.equal(state["embeddings.word.weight"], tiny_encoder(1).embeddings.word.weight)


def test_an_export_with_a_vocab_file_from_elsewhere_leaves_no_stale_tokenizer_json(tmp_path: Path) -> None:
    """tokenizer.json of the earlier export would win over the new vocab.txt (in transformers'
    AutoTokenizer and in xfer's `WordPieceTokenizer.from_dir`)."""
    folder = tmp_path / "hf"
    _first_export_with_tokenizer(folder)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("".join(f"{t}\n" for t in [*SPECIAL_TOKENS, "new", "tokens"]))
    export_hf(folder, tiny_encoder(1), vocab_file=tmp_path / "tok" / "vocab.txt")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "vocab.txt"]
    assert WordPieceTokenizer.from_dir(folder).vocab == tokenizer("new", "tokens").vocab


def test_a_vocab_file_of_a_cased_tokenizer_folder_exports_its_casing(tmp_path: Path) -> None:
    """vocab.txt copied alone was read by transformers as lower-casing (its default): "Hello World"
    became ['hello', '[UNK]'] there, ['Hello', 'World'] in xfer."""
    transformers = pytest.importorskip("transformers")
    cased = WordPieceTokenizer.from_vocab(
        {t: i for i, t in enumerate([*SPECIAL_TOKENS, "Hello", "hello", "World"])}, lowercase=False
    )
    cased.save(tmp_path / "tok")  # vocab.txt + tokenizer.json, as a transformer.vocab output
    _first_export_with_tokenizer(tmp_path / "hf")  # with an old tokenizer to replace
    export_hf(tmp_path / "hf", tiny_encoder(1), vocab_file=tmp_path / "tok" / "vocab.txt")
    names = {p.name for p in (tmp_path / "hf").iterdir()}
    assert names == {"config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json"}
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "hf").tokenize("Hello World") == ["Hello", "World"]
    assert WordPieceTokenizer.from_dir(tmp_path / "hf").vocab == cased.vocab


def test_a_tokenizer_written_into_the_folder_for_this_export_is_kept(tmp_path: Path) -> None:
    """The stages' pattern: save_hf(folder), then export_hf(vocab_file=folder / "vocab.txt")."""
    _first_export_with_tokenizer(tmp_path)
    new = tokenizer("new", "tokens")
    new.save_hf(tmp_path, 16)
    export_hf(tmp_path, tiny_encoder(1), vocab_file=tmp_path / "vocab.txt")
    assert {"tokenizer.json", "tokenizer_config.json", "vocab.txt"} <= {p.name for p in tmp_path.iterdir()}
    assert WordPieceTokenizer.from_dir(tmp_path).vocab == new.vocab


def test_a_vocab_file_larger_than_the_embeddings_is_refused_before_writing(tmp_path: Path) -> None:
    """transformers loads both and fails (or reads past the matrix) on the last ids."""
    big = tokenizer(*(f"w{i}" for i in range(60)))
    big.save(tmp_path / "tok")
    with pytest.raises(ValueError, match=r"has 65 tokens but the encoder only 50 embeddings"):
        export_hf(tmp_path / "hf", tiny_encoder(0), vocab_file=tmp_path / "tok" / "vocab.txt")
    assert not (tmp_path / "hf").exists()


def _model_dir_without(folder: Path, *names: str) -> Path:
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    tensors = load_file(folder / "model.safetensors")
    for name in names:
        del tensors[name]
    save_file(tensors, folder / "model.safetensors")
    return folder


def test_an_xfer_model_dir_missing_encoder_tensors_is_a_checkpoint_error_naming_them(tmp_path: Path) -> None:
    """read_encoder returns the partial state (ELECTRA's init_generator names what it lacks itself);
    fine-tuning failed later in a bare load_state_dict. The header-only check names the file and
    the first missing tensors, in the model's order, before any tensor is loaded."""
    from xfer.transformer.modelio import encoder_weights_problem

    folder = _model_dir_without(
        tmp_path / "m", "encoder.layers.1.qkv.weight", "encoder.layers.0.ffn_in.bias", "encoder.embeddings.norm.bias"
    )
    problem = encoder_weights_problem(folder)
    assert isinstance(problem, CheckpointError)
    message = str(problem)
    assert message.startswith(f"{folder / 'model.safetensors'}: missing tensors of module 'encoder'")
    assert "encoder.embeddings.norm.bias, encoder.layers.0.ffn_in.bias, encoder.layers.1.qkv.weight" in message
    assert f"for the encoder {folder / 'xfer_model.json'} records" in message
    assert len(read_encoder(folder)[1]) == len(tiny_encoder(0).state_dict()) - 3


def test_an_xfer_model_dir_with_extra_encoder_tensors_is_a_checkpoint_error(tmp_path: Path) -> None:
    from xfer.transformer.modelio import encoder_weights_problem

    folder = tmp_path / "m"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    tensors = load_file(folder / "model.safetensors")
    tensors["encoder.layers.9.qkv.weight"] = torch.zeros(3)
    save_file(tensors, folder / "model.safetensors")
    assert re.search(
        r"unexpected tensors of module 'encoder'.*encoder\.layers\.9\.qkv\.weight", str(encoder_weights_problem(folder))
    )


def test_the_header_only_check_reports_a_misshapen_tensor_as_read_encoder_does(tmp_path: Path) -> None:
    import json

    from xfer.transformer.modelio import encoder_weights_problem

    folder = tmp_path / "m"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    document = json.loads((folder / "xfer_model.json").read_text())
    document["modules"]["encoder"]["config"]["vocab_size"] = 60
    (folder / "xfer_model.json").write_text(json.dumps(document))
    problem = encoder_weights_problem(folder)
    with pytest.raises(CheckpointError) as e:
        read_encoder(folder)
    assert isinstance(problem, CheckpointError) and str(problem) == str(e.value)
    assert "'embeddings.word.weight' has shape (50, 128), the config gives (60, 128)" in str(problem)


@pytest.mark.parametrize(
    ("key", "value", "wanted"),
    [
        ("num_layers", "2", "an integer"),  # TypeError in the weights check
        ("num_heads", 2.0, "an integer"),  # TypeError building the model
        ("vocab_size", True, "an integer"),
        ("layer_norm_eps", "1e-12", "a number"),  # TypeError at the first forward pass
        ("unpad", "no", "true or false"),  # silently true
    ],
)
def test_a_wrongly_typed_field_in_xfer_model_json_is_a_checkpoint_error(
    tmp_path: Path, key: str, value: Any, wanted: str
) -> None:
    import json

    folder = tmp_path / "m"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    document = json.loads((folder / "xfer_model.json").read_text())
    document["modules"]["encoder"]["config"][key] = value
    (folder / "xfer_model.json").write_text(json.dumps(document))
    with pytest.raises(
        CheckpointError, match=rf"xfer_model\.json: invalid encoder config for 'encoder': {key} must be {wanted}"
    ):
        read_encoder(folder)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num_attention_heads", 2.9, "num_attention_heads must be an integer, got 2.9"),  # was 2: another model
        ("num_attention_heads", "2", "num_attention_heads must be an integer, got '2'"),
        ("pad_token_id", 1.5, "pad_token_id must be an integer, got 1.5"),
        ("layer_norm_eps", "1e-5", "layer_norm_eps must be a number, got '1e-5'"),
        # a string's first letter was taken for the class: the head was silently dropped
        ("architectures", "ElectraForSequenceClassification", "'architectures' must be a list of class names"),
    ],
)
def test_a_wrongly_typed_field_in_an_hf_config_json_is_a_checkpoint_error(
    tmp_path: Path, key: str, value: Any, message: str
) -> None:
    import json

    from xfer.transformer.heads import SequenceHead

    encoder = tiny_encoder(0)
    assert encoder.config.num_heads == 2
    export_hf(tmp_path, encoder, head=SequenceHead(128, 3, pooler="gelu"))
    config = json.loads((tmp_path / "config.json").read_text())
    assert load_hf(tmp_path)[2].kind == "sequence"
    config[key] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=rf"config\.json: {message}"):
        load_hf(tmp_path)


@pytest.mark.parametrize("layout", ["hf", "xfer"])
def test_a_description_file_that_is_not_utf8_is_a_checkpoint_error(tmp_path: Path, layout: str) -> None:
    """Invalid UTF-8 (a damaged copy) raised a bare UnicodeDecodeError, which is no JSONDecodeError."""
    folder = tmp_path / "m"
    if layout == "hf":
        export_hf(folder, tiny_encoder(0))
        described = folder / "config.json"
    else:
        save_model_dir(folder, {"encoder": tiny_encoder(0)})
        described = folder / "xfer_model.json"
    described.write_bytes(b'{"model_type": "\xff\xfe"}')
    with pytest.raises(CheckpointError, match=rf"{described.name}: cannot read JSON: 'utf-8' codec"):
        read_encoder(folder)


def test_a_model_dir_replaced_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's save_model_dir swapping a new version in between the reads of
    xfer_model.json and model.safetensors gave the old description with the new weights."""
    import safetensors.torch

    from xfer.transformer.modelio import load_model_dir

    folder = tmp_path / "m"
    old, new = tiny_encoder(0), tiny_encoder(1)
    save_model_dir(folder, {"encoder": old}, {"version": "old"})
    real = safetensors.torch.load_file
    swaps = []

    def load_after_a_swap(file: Any, *args: Any, **kwargs: Any) -> Any:
        if not swaps:
            swaps.append(file)
            save_model_dir(folder, {"encoder": new}, {"version": "new"})  # the other process
        return real(file, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "load_file", load_after_a_swap)
    loaded = load_model_dir(folder)
    assert swaps and loaded.meta == {"version": "new"}
    assert torch.equal(loaded.state_dicts["encoder"]["embeddings.word.weight"], new.embeddings.word.weight)


def test_a_model_dir_in_the_middle_of_its_swap_is_waited_for(tmp_path: Path) -> None:
    """Between save_model_dir's two renames nothing is at the path: readers said "does not exist"."""
    import threading

    folder = tmp_path / "m"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    aside = tmp_path / ".m.old-abc"
    aside.mkdir()
    (folder).rename(aside / "d")  # the writer's first rename; the second comes 0.2 s later
    timer = threading.Timer(0.2, lambda: (aside / "d").rename(folder))
    timer.start()
    try:
        _, state, _ = read_encoder(folder)
    finally:
        timer.join()
    assert torch.equal(state["embeddings.word.weight"], tiny_encoder(0).embeddings.word.weight)


@pytest.mark.parametrize("name", ["embeddings.word_embeddings.weight", "electra.embeddings.word_embeddings.weight"])
def test_extra_tensors_cannot_replace_or_duplicate_the_models_tensors(tmp_path: Path, name: str) -> None:
    """The bare name silently replaced the encoder's embeddings (here with zeros); the prefixed one
    wrote a checkpoint that load_hf itself refuses ("are both")."""
    encoder = tiny_encoder(0)
    zeros = torch.zeros_like(encoder.embeddings.word.weight)
    with pytest.raises(ValueError, match=rf"extra_tensors \[{name!r}\] would replace or duplicate"):
        export_hf(tmp_path / "hf", encoder, extra_tensors={name: zeros})
    assert not (tmp_path / "hf").exists()
    export_hf(tmp_path / "hf", encoder, extra_tensors={"pooler.dense.bias": torch.zeros(128)})  # not the model's
    assert "pooler.dense.bias" in load_hf(tmp_path / "hf")[2].remaining


def test_the_header_only_check_passes_complete_folders_and_others(tmp_path: Path) -> None:
    from xfer.transformer.modelio import encoder_weights_problem

    save_model_dir(tmp_path / "good", {"encoder": tiny_encoder(0)})
    assert encoder_weights_problem(tmp_path / "good") is None
    export_hf(tmp_path / "hf", tiny_encoder(0))
    assert encoder_weights_problem(tmp_path / "hf") is None  # no xfer model dir: load_hf checks its own
    assert encoder_weights_problem(tmp_path / "absent") is None  # said by the checks that read its description


def test_the_header_only_check_follows_aliases(tmp_path: Path) -> None:
    """ELECTRA's generator shares the discriminator's embeddings: stored once, under an alias."""
    from xfer.transformer.modelio import encoder_weights_problem
    from xfer.transformer.presets import generator_config

    disc = tiny_encoder(0)
    gen = Encoder(generator_config(disc.config, 0.5), embeddings=disc.embeddings)
    save_model_dir(tmp_path / "g", {"discriminator": disc, "encoder": gen})
    assert "encoder.embeddings.word.weight" not in load_file(tmp_path / "g" / "model.safetensors")
    assert encoder_weights_problem(tmp_path / "g") is None
    read_encoder(tmp_path / "g")


def test_a_swap_that_never_finished_says_where_the_previous_version_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed between its renames leaves nothing at the path: the wait for it ends, and the
    error says where the previous version went (it was waited for five times, then "replaced")."""
    from xfer.transformer import modelio

    monkeypatch.setattr(modelio, "_SWAP_WAIT_S", 0.05)
    folder = tmp_path / "m"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    (tmp_path / ".m.old-abc").mkdir()
    folder.rename(tmp_path / ".m.old-abc" / "d")
    previous = f"its previous version is {tmp_path / '.m.old-abc' / 'd'}"
    with pytest.raises(
        CheckpointError, match=rf"does not exist \(a save into it was interrupted.*{re.escape(previous)}"
    ):
        read_encoder(folder)
    with pytest.raises(CheckpointError, match=rf"no xfer_model\.json\) \(a save into it .*{re.escape(previous)}"):
        modelio.load_model_dir(folder)


def test_an_hf_folder_re_exported_while_it_is_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export_hf over the folder between the reads of config.json and the weights gave the old
    config (here layer_norm_eps 1e-12) with the new weights, which loaded: another function."""
    from xfer.transformer import hf

    old, new = tiny_encoder(0), tiny_encoder(1, layer_norm_eps=1e-5)
    export_hf(tmp_path, old)
    real = hf.read_hf_tensors
    exports = []

    def read_after_an_export(directory: Any) -> Any:
        if not exports:
            exports.append(directory)
            export_hf(tmp_path, new)  # the other process
        return real(directory)

    monkeypatch.setattr(hf, "read_hf_tensors", read_after_an_export)
    config, state, _ = load_hf(tmp_path)
    assert exports and config.layer_norm_eps == 1e-5
    assert torch.equal(state["embeddings.word.weight"], new.embeddings.word.weight)


def test_a_missing_vocab_file_is_refused_before_the_earlier_export_is_touched(tmp_path: Path) -> None:
    """copyfile's FileNotFoundError came after config.json and the weights of the earlier export
    were deleted: a typo in the path left a folder that loads as nothing."""
    export_hf(tmp_path, tiny_encoder(0))
    with pytest.raises(ValueError, match=r"vocab_file .*nope\.txt: cannot read"):
        export_hf(tmp_path, tiny_encoder(1), vocab_file=tmp_path / "nope.txt")
    _, state, _ = load_hf(tmp_path)
    assert torch.equal(state["embeddings.word.weight"], tiny_encoder(0).embeddings.word.weight)


def test_fine_tuning_checks_refuse_an_init_missing_encoder_tensors_before_training(tmp_path: Path) -> None:
    """The header-only check is what `transformer.finetune`'s pre-flight and stage start run on
    `init:` (without it: a bare RuntimeError of load_state_dict once earlier stages had trained)."""
    from xfer.transformer.finetune_config import checkpoint_problems

    folder = _model_dir_without(tmp_path / "m", "encoder.layers.1.qkv.weight")
    problems = checkpoint_problems(None, folder, {}, 16, random_init=False)
    assert any("missing tensors of module 'encoder'" in str(p) for p in problems), problems
    intact = tmp_path / "ok"
    save_model_dir(intact, {"encoder": tiny_encoder(0)})
    assert not [p for p in checkpoint_problems(None, intact, {}, 16, random_init=False) if "tensors" in str(p)]
