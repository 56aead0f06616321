"""The CVT objective: the teacher carries no gradient and sees no dropout; modes and task choice."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from xfer.core.data import TaggedBatch
from xfer.core.trainer import TrainingProgress
from xfer.cvt.objective import CvtObjective, Settings
from xfer.cvt.parsing import ParsingModule
from xfer.cvt.seq2seq import Seq2seqModule
from xfer.cvt.tagging import TaggingModule
from xfer.cvt.vocab import REMOVED

TARGETS = ["<pad>", "<unk>", "<s>", "</s>", "ein", "hund", "läuft", "￭."]


def objective(kit, mode="cvt", teacher="separate", cvt_tasks="all") -> CvtObjective:
    k = kit()
    e = k.encoder
    modules = {
        "tag": TaggingModule(e.full_size, e.uni_size, 16, ["A", "B", "C"], ["fwd", "bwd", "future", "past", "full"]),
        "parse": ParsingModule(e.full_size, e.uni_size, 12, 6, ["a", "root"], ["root"], ["fwd-bwd", "bwd-fwd", "full"]),
        "mt": Seq2seqModule(e.full_size, 2 * e.layer2.output_size, TARGETS, k.sizes, ["attention_dropout", "future"]),
    }
    settings = Settings(beam_size=2, max_target_length=6)
    obj = CvtObjective(e, modules, settings, mode=mode, teacher=teacher, cvt_tasks=cvt_tasks, task_weights=None, seed=3)
    obj.kit = k
    return obj.train()


def unlabeled_step(obj, sentences) -> torch.Tensor:
    out = obj(TaggedBatch("unlabeled", obj.kit.batch(sentences)))
    out.loss.backward()
    return out.loss


def grads(module: torch.nn.Module) -> list[torch.Tensor | None]:
    return [p.grad for p in module.parameters()]


@pytest.mark.parametrize("teacher", ["separate", "shared"])
def test_teacher_targets_carry_no_gradient(kit, sentences, teacher):
    obj = objective(kit, teacher=teacher)
    loss = unlabeled_step(obj, sentences)
    assert torch.isfinite(loss) and loss > 0
    for name in ("tag", "parse", "mt"):
        head = obj.head(name)
        assert all(g is None for g in grads(head.primary)), f"{name}: the teacher (primary module) got a gradient"
    students = [
        obj.head("tag").views,
        obj.head("tag").full,
        obj.head("parse").views,
        obj.head("mt").aux,
        obj.encoder.layer1,
    ]
    for student in students:
        assert any(g is not None and g.abs().sum() > 0 for g in grads(student)), "a student got no gradient"


def test_teacher_is_the_primary_module_without_dropout(kit, sentences):
    obj = objective(kit)
    batch = obj.kit.batch(sentences)
    targets = []
    for seed in (1, 2):
        torch.manual_seed(seed)  # the training-mode RNG state must not matter
        targets.append(obj.teach(obj.encoder(batch, 0.0), batch, ["tag", "parse", "mt"]))
    for name in ("tag", "parse"):
        assert not targets[0][name].requires_grad
        torch.testing.assert_close(targets[0][name], targets[1][name], rtol=0, atol=0)
    assert torch.equal(targets[0]["mt"]["dec_out"], targets[1]["mt"]["dec_out"])
    obj.eval()
    clean = obj.encoder(batch, 0.0)
    torch.testing.assert_close(targets[0]["tag"], F.softmax(obj.head("tag").primary_logits(clean), -1))
    with_dropout = obj.train().encoder(batch, 0.5)
    assert not torch.allclose(obj.head("tag").primary_logits(with_dropout).softmax(-1), targets[0]["tag"])


def test_word_dropout_student_is_the_primary_module_on_removed_words(kit, sentences):
    obj = objective(kit, mode="word_dropout")
    obj.settings.word_dropout = 0.5
    batch = obj.kit.batch(sentences * 20)
    torch.manual_seed(0)
    dropped = obj.drop_words(batch)
    removed = dropped["words"] == REMOVED
    inside = (batch["words"] != dropped["words"]) | removed
    lengths = batch["lengths"]
    positions = torch.arange(batch["words"].shape[1])[None]
    words = (positions > 0) & (positions < (lengths - 1)[:, None])
    assert bool((removed <= words).all()) and bool((inside == removed).all())
    assert 0.4 < removed.sum().item() / words.sum().item() < 0.6
    assert bool((dropped["slots"][removed] == 1).all())  # their characters are hidden too
    unlabeled_step(obj, sentences)
    assert all(g is None for g in grads(obj.head("tag").views)), "word dropout trains no auxiliary view"
    assert any(g is not None for g in grads(obj.head("tag").primary))


def test_one_task_at_a_time_teaches_a_single_task_per_batch(kit, sentences):
    obj = objective(kit, cvt_tasks="one")
    seen = []
    for step in range(6):
        obj.zero_grad(set_to_none=True)
        obj.set_progress(TrainingProgress(step, 10))
        assert obj.unlabeled_tasks() == obj.unlabeled_tasks()  # a function of the step only
        unlabeled_step(obj, sentences)
        trained = [n for n in ("tag", "parse", "mt") if any(g is not None for g in grads(obj.head(n)))]
        assert len(trained) == 1
        seen.append(trained[0])
    assert len(set(seen)) > 1


def test_labeled_loss_is_smoothed_cross_entropy_per_word(kit, sentences):
    obj = objective(kit, mode="supervised").eval()
    batch = obj.kit.batch(sentences)
    tags = torch.full(batch["words"].shape, -100)
    gold = [[i % 3 for i in range(len(s))] for s in sentences]
    for b, row in enumerate(gold):
        tags[b, 1 : 1 + len(row)] = torch.tensor(row)
    batch["labels"] = tags
    out = obj(TaggedBatch("labeled", TaggedBatch("tag", batch)))
    logits = obj.head("tag").primary_logits(obj.encoder(batch, 0.0))
    expected = F.cross_entropy(logits, torch.tensor([t for row in gold for t in row]), label_smoothing=0.1)
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("mode", ["cvt", "word_dropout"])
def test_teacher_and_student_passes_share_only_the_dropout_free_inputs(kit, sentences, mode):
    """The unlabeled step computes the char-CNN once for its two passes: loss and gradients must be
    those of two fully independent passes (teacher without dropout, student with it)."""
    obj = objective(kit, mode=mode)
    batch = obj.kit.batch(sentences)
    torch.manual_seed(5)
    shared = unlabeled_step(obj, sentences)
    shared_grads = [g.clone() for g in grads(obj.encoder)]
    obj.zero_grad()
    torch.manual_seed(5)
    with torch.no_grad():
        targets = obj.teach(obj.encoder(batch, 0.0), batch, obj.tasks)
    student_batch = obj.drop_words(batch) if mode == "word_dropout" else batch
    states = obj.encoder(student_batch, obj.settings.unlabeled_dropout)
    terms = [
        term
        for task in obj.tasks
        for term in obj.head(task).student_losses(states, batch, targets[task], obj.settings, mode == "word_dropout")
    ]
    independent = obj.normalize(terms)
    independent.backward()
    torch.testing.assert_close(shared, independent, rtol=1e-6, atol=1e-6)
    for a, b in zip(shared_grads, grads(obj.encoder), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert obj.encoder.char_cnn.convs[0].weight.grad.abs().sum() > 0, "the char-CNN must still learn"
