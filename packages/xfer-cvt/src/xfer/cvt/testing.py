"""Tiny data and a tiny `cvt.train` recipe for tests (this package's and task plugins').

A task plugin whose task is tagging, parsing or seq2seq can run `xfer.testing.ComponentConformance`
with `tiny_cvt_recipe("{name: mine/task, ...}")` after `write_tiny_data(directory)`:

    class TestMyTask(ComponentConformance):
        component = ("task", "mine/task")
        config_path = "stages.fit.tasks.0"
        recipe = tiny_cvt_recipe("{name: mine/task, train_file: train.conllu, dev_file: dev.conllu}")
        def prepare(self, directory):
            write_tiny_data(directory)

Files written (a made-up English-like language, enough for a few training steps):
`chunk-{train,dev}.txt` (CoNLL-2000 columns), `ner-{train,dev}.txt` (CoNLL-2003 columns, IOB2),
`{train,dev}.conllu` (UPOS + trees), `mt/{train,dev}.{en,xx}` (parallel text), `unlabeled.txt`.
"""

from __future__ import annotations

import random
from pathlib import Path

NOUNS = ["dog", "house", "river", "city", "song", "car", "tree", "book"]
NAMES = ["Bob", "Mary", "Paris", "London", "Oslo"]
VERBS = ["sees", "likes", "finds", "builds", "sells"]
ADJECTIVES = ["big", "old", "red", "quiet"]
TRANSLATION = {w: w[::-1] for w in NOUNS + VERBS + ADJECTIVES + ["the", "a"]}


def _sentence(rng: random.Random) -> list[tuple[str, str, str, str, int, str]]:
    """(word, UPOS, chunk tag, NER tag, head, relation) for a subject-verb-object sentence."""

    def noun_phrase(start: int, head_of_np: int) -> list[tuple]:
        if rng.random() < 0.4:
            name = rng.choice(NAMES)
            kind = "LOC" if name in ("Paris", "London", "Oslo") else "PER"
            return [(name, "PROPN", "B-NP", f"B-{kind}", head_of_np, "nsubj")]
        words = [
            (
                "the" if rng.random() < 0.5 else "a",
                "DET",
                "B-NP",
                "O",
                start + 2 + (1 if rng.random() < 0.5 else 0),
                "det",
            )
        ]
        if words[0][4] == start + 3:
            words.append((rng.choice(ADJECTIVES), "ADJ", "I-NP", "O", start + 3, "amod"))
        words.append((rng.choice(NOUNS), "NOUN", "I-NP", "O", head_of_np, "nsubj"))
        return [(w, u, c, n, h if i < len(words) - 1 else head_of_np, r) for i, (w, u, c, n, h, r) in enumerate(words)]

    subject = noun_phrase(0, 0)  # heads fixed below
    verb_index = len(subject) + 1
    subject = [(w, u, c, n, verb_index if r == "nsubj" else h, r) for w, u, c, n, h, r in subject]
    verb = [(rng.choice(VERBS), "VERB", "B-VP", "O", 0, "root")]
    obj = noun_phrase(verb_index, verb_index)
    obj = [(w, u, c, n, h, "obj" if r == "nsubj" else r) for w, u, c, n, h, r in obj]
    end = [(".", "PUNCT", "O", "O", verb_index, "punct")]
    return subject + verb + obj + end


def write_tiny_data(directory: Path, train: int = 48, dev: int = 12, unlabeled: int = 80, seed: int = 0) -> None:
    """Write every tiny file listed in the module docstring into `directory`."""
    rng = random.Random(seed)
    (directory / "mt").mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("dev", dev)):
        sentences = [_sentence(rng) for _ in range(count)]
        chunk_lines, ner_lines, conllu_lines, src, tgt = [], [], [], [], []
        for s in sentences:
            chunk_lines += [f"{w} {u} {c}" for w, u, c, n, h, r in s] + [""]
            ner_lines += [f"{w} {u} {c} {n}" for w, u, c, n, h, r in s] + [""]
            conllu_lines += [
                f"{i}\t{w}\t{w.lower()}\t{u}\t_\t_\t{h}\t{r}\t_\t_" for i, (w, u, c, n, h, r) in enumerate(s, 1)
            ]
            conllu_lines.append("")
            words = [w for w, *_ in s]
            src.append(" ".join(words[:-1]) + ".")
            tgt.append(" ".join(TRANSLATION.get(w, w) for w in words[:-1]) + ".")
        (directory / f"chunk-{split}.txt").write_text("\n".join(chunk_lines) + "\n", encoding="utf-8")
        (directory / f"ner-{split}.txt").write_text("\n".join(ner_lines) + "\n", encoding="utf-8")
        (directory / f"{split}.conllu").write_text("\n".join(conllu_lines) + "\n", encoding="utf-8")
        (directory / "mt" / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
        (directory / "mt" / f"{split}.xx").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    lines = [" ".join(w for w, *_ in _sentence(rng)) for _ in range(unlabeled)]
    (directory / "unlabeled.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def tiny_cvt_recipe(*tasks: str, mode: str = "cvt", steps: int = 8, checkpoint_every: int = 3, extra: str = "") -> str:
    """A recipe whose stage `fit` runs `cvt.train` (model `tiny`, fp32, `log_every: 1` so a
    conformance kill lands on an exact step) on `tasks` (YAML flow mappings) and `unlabeled.txt`."""
    task_lines = "\n".join(f"      - {t}" for t in tasks)
    return f"""
stages:
  fit:
    kind: cvt.train
    model: tiny
    mode: {mode}
    tasks:
{task_lines}
    unlabeled: {{files: [unlabeled.txt], chunk_lines: 16, pool_batches: 2}}
    beam_size: 2
    max_target_length: 12
    target_min_count: 1
{extra}
    train: {{steps: {steps}, batch_size: 8, log_every: 1, checkpoint_every: {checkpoint_every}, eval_every: 4, precision: fp32}}
"""
