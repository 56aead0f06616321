"""`pooler: tanh` fine-tuned from a BERT checkpoint starts from its pre-trained pooler, and exports back to it.

BERT's fine-tuning recipe is [CLS] -> pre-trained pooler (dense + tanh) -> classifier; `load_hf`
leaves the pooler (`bert.pooler.dense`) in `remaining`, and the fine-tuning stage started the
tanh head's `dense` at random instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.transformer.hf import checkpoint_pooler

transformers = pytest.importorskip("transformers", reason="BERT pooler tests need `transformers`")

WORDS = ["the", "dog", "dogs", "cat", "cats", "runs", "run", "sleeps", "sleep", "that", "sees", "see", "."]


def _vocab() -> list[str]:
    from xfer.transformer.tokenization import SPECIAL_TOKENS

    return [*SPECIAL_TOKENS, *WORDS]


def _bert(cls_name: str, folder: Path, **config: object) -> torch.nn.Module:
    """A tiny random `cls_name` (every weight perturbed: HF zero-initialises biases) saved to `folder`."""
    torch.manual_seed(0)
    base = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    if cls_name.startswith("Electra"):
        cfg = transformers.ElectraConfig(**{**base, "embedding_size": 32, **config})
    else:
        cfg = transformers.BertConfig(**{**base, **config})
    model = getattr(transformers, cls_name)(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.eval().save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(_vocab()) + "\n", encoding="utf-8")
    return model


@pytest.mark.parametrize("cls_name", ["BertModel", "BertForPreTraining", "BertForSequenceClassification"])
def test_checkpoint_pooler_reads_berts_pooler(tmp_path: Path, cls_name: str) -> None:
    model = _bert(cls_name, tmp_path, vocab_size=len(_vocab()))
    bert = model if cls_name == "BertModel" else model.bert
    pooler = checkpoint_pooler(tmp_path)
    assert pooler is not None
    assert torch.equal(pooler["dense.weight"], bert.pooler.dense.weight)
    assert torch.equal(pooler["dense.bias"], bert.pooler.dense.bias)


@pytest.mark.parametrize("cls_name", ["ElectraForPreTraining", "BertForMaskedLM"])
def test_checkpoint_without_pooler_has_none(tmp_path: Path, cls_name: str) -> None:
    _bert(cls_name, tmp_path, vocab_size=len(_vocab()))
    assert checkpoint_pooler(tmp_path) is None


def test_half_a_pooler_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    _bert("BertModel", tmp_path, vocab_size=len(_vocab()))
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["pooler.dense.bias"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"{tmp_path}.*bert\.pooler\.dense\.bias"):
        checkpoint_pooler(tmp_path)


def _finetune(tmp_path: Path, checkpoint: Path, export_hf: bool = True) -> Path:
    from xfer.testing import make_host, run_recipe_file, write_recipe

    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  finetune:
    kind: transformer.finetune
    init: {checkpoint}
    max_length: 32
    export_hf: {str(export_hf).lower()}
    objective: {{name: transformer.sequence, pooler: tanh}}
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8, lr: 1e-9, warmup_fraction: 0.0, precision: fp32}}
""",
    )
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    return tmp_path / "run/finetune"


def test_tanh_head_starts_from_the_checkpoints_pooler_and_exports_it(tmp_path: Path) -> None:
    from xfer.transformer.modelio import load_model_dir

    model = _bert("BertModel", tmp_path / "bert", vocab_size=len(_vocab()), max_position_embeddings=64)
    stage = _finetune(tmp_path, tmp_path / "bert")
    model_dir = load_model_dir(stage / "outputs/models/toy-agreement")
    head = model_dir.state_dicts["head"]
    # lr 1e-9 for one step: the fine-tuned pooler is the pre-trained one (a random one is ~0.02 off)
    torch.testing.assert_close(head["dense.weight"], model.pooler.dense.weight.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(head["dense.bias"], model.pooler.dense.bias.detach(), rtol=0, atol=1e-6)
    report = (stage / "report.md").read_text(encoding="utf-8")
    assert "pre-trained pooler" in report, report

    # the HF export is BERT's layout, and transformers computes the same logits from it
    encoder, xfer_head = model_dir.build("encoder").eval(), model_dir.build("head").eval()
    exported = transformers.BertForSequenceClassification.from_pretrained(stage / "outputs/models/toy-agreement/hf")
    exported.eval()
    torch.testing.assert_close(exported.bert.pooler.dense.weight, head["dense.weight"], rtol=0, atol=0)
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([9, 4, 12])
    mask = (torch.arange(12)[None] < lengths[:, None]).long()
    ids = torch.randint(5, len(_vocab()), (3, 12), generator=g) * mask
    types = torch.zeros_like(ids)
    with torch.no_grad():
        ours = xfer_head(encoder(ids, mask, types).last_hidden_state)
        theirs = exported(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_electra_checkpoint_tanh_head_says_its_pooler_is_random(tmp_path: Path) -> None:
    _bert("ElectraForPreTraining", tmp_path / "electra", vocab_size=len(_vocab()), max_position_embeddings=64)
    stage = _finetune(tmp_path, tmp_path / "electra", export_hf=False)
    report = (stage / "report.md").read_text(encoding="utf-8")
    assert "randomly initialised pooler" in report, report
