"""Numerical parity with HF `transformers` (import and export), and safe checkpoint loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.testing import make_host
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import SequenceHead, SpanQAHead, TokenHead
from xfer.transformer.hf import export_hf, load_hf, xfer_to_hf

transformers = pytest.importorskip("transformers", reason="HF parity tests need `transformers`")

ELECTRA = {
    "vocab_size": 120,
    "embedding_size": 24,
    "hidden_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "max_position_embeddings": 40,
}
BERT = {
    "vocab_size": 120,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 40,
}
TOL = 1e-5


def hf_model(cls_name: str, **config):
    torch.manual_seed(0)
    cls = getattr(transformers, cls_name)
    config_cls = transformers.ElectraConfig if cls_name.startswith("Electra") else transformers.BertConfig
    base = ELECTRA if cls_name.startswith("Electra") else BERT
    model = cls(config_cls(**{**base, **config}))
    with torch.no_grad():  # HF zero-initialises biases and LayerNorm: randomise everything for a real test
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def inputs(vocab: int = 120, lengths=(16, 5, 11, 1), length: int = 16):
    g = torch.Generator().manual_seed(1)
    mask = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(1, vocab, (len(lengths), length), generator=g) * mask
    types = (torch.arange(length)[None] >= torch.tensor(lengths)[:, None] // 2).long() * mask
    return ids, mask, types


def xfer_from(directory: Path, host=None):
    config, state, info = load_hf(directory, host)
    encoder = Encoder(config).eval()
    encoder.load_state_dict(state)
    head = info.build()
    return encoder, (head.eval() if head is not None else None), info


def masked_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return (a - b)[mask.bool()].abs().max().item()


@pytest.mark.parametrize(
    "cls_name",
    [
        "ElectraModel",
        "BertModel",
        "ElectraForPreTraining",
        "ElectraForMaskedLM",
        "BertForMaskedLM",
        "BertForPreTraining",
    ],
)
def test_import_base_models(tmp_path: Path, cls_name: str) -> None:
    hf = hf_model(cls_name)
    hf.save_pretrained(tmp_path)
    # transformer's own heads only: xfer-electra (when installed) registers heads for the
    # ELECTRA pre-training classes, whose parity tests/electra checks
    encoder, head, info = xfer_from(tmp_path, make_host(["xfer.transformer.plugin"], autoload=False))
    assert head is None and info.architecture == cls_name
    ids, mask, types = inputs()
    base = getattr(hf, hf.base_model_prefix, hf)
    with torch.no_grad():
        ref = base(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        for unpad in (True, False):
            encoder.config.unpad = unpad
            out = encoder(ids, mask, types).last_hidden_state
            assert masked_diff(out, ref, mask) <= TOL
    expected_remaining = {
        "ElectraModel": set(),
        "ElectraForPreTraining": {"discriminator_predictions."},
        "ElectraForMaskedLM": {"generator_predictions.", "generator_lm_head."},
        "BertModel": {"pooler."},
        "BertForMaskedLM": {"cls."},
        "BertForPreTraining": {"bert.pooler.", "cls."},
    }[cls_name]
    assert {next(p for p in expected_remaining if k.startswith(p)) for k in info.remaining} == expected_remaining


@pytest.mark.parametrize(
    "cls_name, kind",
    [
        ("ElectraForSequenceClassification", "sequence"),
        ("ElectraForTokenClassification", "token"),
        ("ElectraForQuestionAnswering", "span_qa"),
        ("BertForSequenceClassification", "sequence"),
        ("BertForTokenClassification", "token"),
        ("BertForQuestionAnswering", "span_qa"),
    ],
)
def test_import_and_export_task_models(tmp_path: Path, cls_name: str, kind: str) -> None:
    hf = hf_model(cls_name, num_labels=2 if kind == "span_qa" else 3)
    hf.save_pretrained(tmp_path / "hf")
    encoder, head, info = xfer_from(tmp_path / "hf")
    assert info.kind == kind and not info.remaining
    if kind == "sequence":
        assert head.pooler == ("gelu" if cls_name.startswith("Electra") else "tanh")
    ids, mask, types = inputs()

    def ours(enc, hd):
        h = enc(ids, mask, types).last_hidden_state
        if kind == "span_qa":
            out = hd(h)
            return torch.stack([out.start_logits, out.end_logits], -1)
        return hd(h)

    def theirs(model):
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        if kind == "span_qa":
            return torch.stack([out.start_logits, out.end_logits], -1)
        return out.logits

    with torch.no_grad():
        ref, got = theirs(hf), ours(encoder, head)
    select = mask.bool() if kind != "sequence" else torch.ones(len(ids), dtype=torch.bool)
    assert (got - ref)[select].abs().max() <= TOL

    # export back: transformers loads it with no missing/unexpected keys and the same outputs
    export_hf(tmp_path / "out", encoder, head=head, model_type=info.model_type)
    reloaded, loading = getattr(transformers, cls_name).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"] and not loading["mismatched_keys"]
    with torch.no_grad():
        assert (theirs(reloaded.eval()) - ref)[select].abs().max() <= TOL


def test_export_random_xfer_models_load_in_transformers(tmp_path: Path) -> None:
    from xfer.transformer.presets import preset

    torch.manual_seed(0)
    config = preset("tiny", vocab_size=200, hidden_size=64, embedding_size=32, max_position_embeddings=32)
    encoder = Encoder(config).eval()
    ids, mask, types = inputs(vocab=200)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n")
    cases = [
        (None, "ElectraModel"),
        (SequenceHead(64, 1, pooler="gelu"), "ElectraForSequenceClassification"),
        (TokenHead(64, 5), "ElectraForTokenClassification"),
        (SpanQAHead(64), "ElectraForQuestionAnswering"),
    ]
    with torch.no_grad():
        hidden = encoder(ids, mask, types).last_hidden_state
    for head, arch in cases:
        out_dir = export_hf(tmp_path / arch, encoder, head=head, vocab_file=vocab)
        hf_config = json.loads((out_dir / "config.json").read_text())
        assert hf_config["architectures"] == [arch] and hf_config["hidden_act"] == "gelu"
        assert (out_dir / "vocab.txt").read_text() == vocab.read_text()
        loaded, loading = getattr(transformers, arch).from_pretrained(out_dir, output_loading_info=True)
        assert not loading["missing_keys"] and not loading["unexpected_keys"], loading
        loaded.eval()
        with torch.no_grad():
            result = loaded(input_ids=ids, attention_mask=mask, token_type_ids=types)
            if head is None:
                assert masked_diff(result.last_hidden_state, hidden, mask) <= TOL
            elif isinstance(head, SequenceHead):
                assert hf_config.get("problem_type") == "regression"
                assert (result.logits - head.eval()(hidden)).abs().max() <= TOL
            elif isinstance(head, TokenHead):
                assert masked_diff(result.logits, head.eval()(hidden), mask) <= TOL
            else:
                assert masked_diff(result.start_logits, head(hidden).start_logits, mask) <= TOL
    with pytest.raises(ValueError, match="no HF electra equivalent"):
        export_hf(tmp_path / "x", encoder, head=SequenceHead(64, 2, pooler="none"))
    with pytest.raises(ValueError, match="no HF equivalent"):
        export_hf(tmp_path / "x", encoder, head=SpanQAHead(64, joint_end=True))


def test_bert_model_round_trip_keeps_pooler(tmp_path: Path) -> None:
    hf = hf_model("BertModel")
    hf.save_pretrained(tmp_path / "hf")
    encoder, _, info = xfer_from(tmp_path / "hf")
    export_hf(tmp_path / "out", encoder, model_type="bert", extra_tensors=info.remaining)
    reloaded, loading = transformers.BertModel.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
    ids, mask, types = inputs()
    with torch.no_grad():
        a = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).pooler_output
        b = reloaded.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types).pooler_output
    assert (a - b).abs().max() <= TOL


def test_gradients_match_hf(tmp_path: Path) -> None:
    """Training-mode backward (dropout 0) through the unpadded, bucketed CPU attention matches HF."""
    hf = hf_model("ElectraModel", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    hf.save_pretrained(tmp_path)
    encoder, _, _ = xfer_from(tmp_path)
    hf.train()
    encoder.train()
    ids, mask, types = inputs()
    weights = torch.randn(*ids.shape, 48, generator=torch.Generator().manual_seed(3)) * mask[..., None]
    (hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state * weights).sum().backward()
    (encoder(ids, mask, types).last_hidden_state * weights).sum().backward()
    ours = xfer_to_hf({n: p.grad for n, p in encoder.named_parameters()}, encoder.config)
    theirs = {n: p.grad for n, p in hf.named_parameters()}
    assert ours.keys() == theirs.keys()
    for name, g in theirs.items():
        assert torch.allclose(ours[name], g, atol=1e-5, rtol=1e-4), name


def test_hidden_states_match_hf(tmp_path: Path) -> None:
    hf = hf_model("ElectraModel")
    hf.save_pretrained(tmp_path)
    encoder, _, _ = xfer_from(tmp_path)
    ids, mask, types = inputs()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True).hidden_states
        got = encoder(ids, mask, types, output_hidden_states=True).hidden_states
    assert len(ref) == len(got) == 3
    for a, b in zip(ref, got, strict=True):
        assert masked_diff(a, b, mask) <= TOL


def test_real_electra_small_size(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = transformers.ElectraModel(transformers.ElectraConfig()).eval()  # ELECTRA-Small sizes
    hf.save_pretrained(tmp_path)
    encoder, _, _ = xfer_from(tmp_path)
    assert (encoder.config.hidden_size, encoder.config.num_layers, encoder.config.embedding_size) == (256, 12, 128)
    ids, mask, types = inputs(vocab=30522, lengths=(128, 77, 30), length=128)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        assert masked_diff(encoder(ids, mask, types).last_hidden_state, ref, mask) <= TOL


def test_pytorch_bin_weights_only(tmp_path: Path) -> None:
    hf = hf_model("BertForSequenceClassification", num_labels=2)
    hf.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    encoder, head, info = xfer_from(tmp_path)
    assert info.kind == "sequence"
    ids, mask, types = inputs()
    with torch.no_grad():
        assert (
            head(encoder(ids, mask, types).last_hidden_state)
            - hf(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        ).abs().max() <= TOL


class _Payload:
    """Unpickling this would create a file: proves that loading never executes pickled code."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_pickle_payload_is_refused(tmp_path: Path) -> None:
    hf_model("BertModel").config.save_pretrained(tmp_path)
    marker = tmp_path / "executed"
    torch.save(
        {"embeddings.word_embeddings.weight": torch.zeros(2), "evil": _Payload(str(marker))},
        tmp_path / "pytorch_model.bin",
    )
    with pytest.raises(CheckpointError, match="refused"):
        load_hf(tmp_path)
    assert not marker.exists()
    torch.save({"weights": [1, 2]}, tmp_path / "pytorch_model.bin")  # loadable, but not a state dict
    with pytest.raises(CheckpointError, match="state dict"):
        load_hf(tmp_path)


def test_checkpoint_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_hf(tmp_path / "nope")
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_hf(tmp_path)
    hf = hf_model("ElectraModel")
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(CheckpointError, match="unsupported model_type 'roberta'"):
        load_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu_new"}))
    with pytest.raises(CheckpointError, match="hidden_act"):
        load_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["encoder.layer.1.intermediate.dense.weight"] = torch.zeros(7, 48)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"ffn_in\.weight.*\(7, 48\)"):
        load_hf(tmp_path)
    del tensors["encoder.layer.1.intermediate.dense.weight"]
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"missing encoder tensors.*layers\.1\.ffn_in\.weight"):
        load_hf(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights file"):
        load_hf(tmp_path)


@pytest.mark.parametrize("cls_name", ["ElectraForPreTraining", "BertModel"])
def test_finetune_stage_starts_from_an_hf_checkpoint_dir(tmp_path: Path, cls_name: str) -> None:
    """`init:` a folder written by `save_pretrained` (+ its vocab.txt) fine-tunes from those weights."""
    from xfer.testing import make_host, run_recipe_file, write_recipe
    from xfer.transformer.modelio import load_model_dir
    from xfer.transformer.tokenization import SPECIAL_TOKENS

    words = ["the", "dog", "dogs", "cat", "cats", "runs", "run", "sleeps", "sleep", "that", "sees", "see", "."]
    vocab = [*SPECIAL_TOKENS, *words]
    hf = hf_model(cls_name, vocab_size=len(vocab), max_position_embeddings=64)
    checkpoint = tmp_path / "hf"
    hf.save_pretrained(checkpoint)
    (checkpoint / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  finetune:
    kind: transformer.finetune
    init: {checkpoint}
    max_length: 48
    tasks: [{{name: toy/agreement, train_size: 32, dev_size: 16}}]
    train: {{steps: 1, batch_size: 8, lr: 1e-9, warmup_fraction: 0.0, precision: fp32}}
""",
    )
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    model_dir = load_model_dir(tmp_path / "run/finetune/outputs/models/toy-agreement")
    tuned = model_dir.state_dicts["encoder"]
    base = hf.electra if cls_name.startswith("Electra") else hf
    expected = base.embeddings.word_embeddings.weight.detach()
    assert tuned["embeddings.word.weight"].shape == expected.shape
    torch.testing.assert_close(tuned["embeddings.word.weight"], expected, rtol=0, atol=1e-6)
