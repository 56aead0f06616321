"""Transformer features as CVT encoder input: first-sub-token alignment (windows of long sentences
stitched back), frozen vs fine-tuned, from an xfer model dir or a Hugging Face folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xfer.cvt.data import Featurizer
from xfer.cvt.model import TransformerFeatures
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.cvt.vocab import build_vocab
from xfer.testing import make_host, output_tensors, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

PIECES = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "dog",
    "big",
    "house",
    "a",
    "sees",
    "##s",
    "ho",
    "##use",
    ".",
]


def tiny_transformer() -> tuple[Encoder, WordPieceTokenizer]:
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=len(PIECES), embedding_size=16, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
        max_position_embeddings=64,
    )  # fmt: skip
    return Encoder(config).eval(), WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(PIECES)})


def test_features_are_first_subtoken_states_across_windows():
    encoder, tokenizer = tiny_transformer()
    sentences = [["the", "dogs", "sees", "a", "big", "house", "."], ["houses", "."]]
    vocab = build_vocab(
        [w for s in sentences for w in s], None, lowercase=True, min_count=1, unlabeled_words=0, char_min_count=1
    )
    batch = Featurizer(vocab, 20, tokenizer, wordpiece_length=6).inputs(sentences)  # 4 pieces per window
    assert batch["wp_ids"].shape[0] > len(sentences)  # the first sentence needed several windows
    features = TransformerFeatures(encoder, layer=-1).eval()(batch, batch["words"].shape[1])
    for b, sentence in enumerate(sentences):
        for window in tokenizer.encode_words_windows(sentence, max_length=6):
            hidden = encoder(torch.tensor([window.input_ids])).last_hidden_state[0]
            for i, start in enumerate(window.word_starts):
                position = 1 + window.first_word + i  # position 0 is <start>
                torch.testing.assert_close(features[b, position], hidden[start])
    assert features[:, 0].abs().sum() == 0 and features[1, 3:].abs().sum() == 0  # <start>, <end>, padding


def save_xfer_dir(folder: Path) -> Path:
    encoder, tokenizer = tiny_transformer()
    save_model_dir(folder, {"encoder": encoder}, {"what": "tiny random model for tests"})
    tokenizer.save(folder)
    return folder


def save_hf_dir(folder: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    config = transformers.ElectraConfig(
        vocab_size=len(PIECES), embedding_size=16, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.ElectraModel(config).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(PIECES) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("finetune", [False, True], ids=["frozen", "finetuned"])
def test_stage_trains_on_transformer_features(tmp_path, finetune):
    write_tiny_data(tmp_path)
    save_xfer_dir(tmp_path / "electra")
    extra = f"    features: {{init: electra, finetune: {str(finetune).lower()}, lr_scale: 0.5, max_length: 12}}"
    chunk = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(chunk, steps=3, extra=extra))
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    weights = output_tensors(tmp_path / "run", "fit")
    original = tiny_transformer()[0].state_dict()
    name = "model/model.safetensors:cvt.encoder.features.encoder.layers.0.qkv.weight"
    moved = not torch.equal(weights[name], original["layers.0.qkv.weight"])
    assert moved == finetune


def test_stage_reads_a_hugging_face_folder_and_replaces_words(tmp_path):
    write_tiny_data(tmp_path)
    save_hf_dir(tmp_path / "hf")
    extra = "    features: {init: hf, combine: replace, joins: input, max_length: 12}"
    chunk = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(chunk, steps=2, mode="supervised", extra=extra))
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    names = output_tensors(tmp_path / "run", "fit")
    assert not any("word_embedding" in n or "char_cnn" in n for n in names)
    assert any("features.encoder" in n for n in names)


def test_fine_tuned_features_drop_out_in_the_student_pass_but_not_in_the_teacher_pass():
    """The CVT teacher sees the input without noise, the Transformer's own dropout included."""
    from xfer.cvt.config import PRESETS
    from xfer.cvt.model import WordEncoder
    from xfer.cvt.objective import CvtObjective, Settings
    from xfer.cvt.tagging import TaggingModule

    transformer, tokenizer = tiny_transformer()
    transformer.config.hidden_dropout = 0.3
    sentences = [["the", "dogs", "sees", "a", "big", "house", "."], ["houses", "."]]
    vocab = build_vocab(
        [w for s in sentences for w in s], None, lowercase=True, min_count=1, unlabeled_words=0, char_min_count=1
    )
    batch = Featurizer(vocab, 20, tokenizer, wordpiece_length=6).inputs(sentences)
    features = TransformerFeatures(transformer, finetune=True)
    encoder = WordEncoder(PRESETS["tiny"], len(vocab.words), len(vocab.chars), features=features)
    module = TaggingModule(encoder.full_size, encoder.uni_size, 8, ["A", "B"], ["fwd", "full"])
    objective = CvtObjective(encoder, {"tag": module}, Settings()).train()
    teacher, student = [], []
    for seed in (1, 2):
        torch.manual_seed(seed)
        teacher.append(objective.teach(encoder(batch, 0.0, clean=True), batch, ["tag"])["tag"])
        student.append(features(batch, batch["words"].shape[1]))
    torch.testing.assert_close(teacher[0], teacher[1], rtol=0, atol=0)
    assert not torch.equal(student[0], student[1]), "training passes keep the Transformer's dropout"
    assert transformer.training, "the Transformer is back in training mode after the teacher pass"
