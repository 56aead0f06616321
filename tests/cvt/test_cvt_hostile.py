"""What a user feeds `cvt.train` and `cvt.vectors` (unlabeled files, word vectors, vocabulary
limits) done wrong: each mistake is an error naming its file (and line) or knob, in the pre-flight
when the file exists before the run, never found hours into training nor silently trained on."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError, RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.cvt.data import UnlabeledCorpus, UnlabeledStream
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.cvt.vocab import read_vectors
from xfer.testing import make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
MT = "{name: mt/parallel, data_dir: mt, source_lang: en, target_lang: xx}"
UNLABELED_LINE = "    unlabeled: {files: [unlabeled.txt], chunk_lines: 16, pool_batches: 2}\n"


def recipe_with(
    directory: Path, files: str = "[unlabeled.txt]", extra: str = "", mode: str = "cvt", **unlabeled: str
) -> Path:
    """The tiny chunking recipe with `unlabeled.files: <files>` (and other `unlabeled` knobs), `extra` stage lines."""
    write_tiny_data(directory)
    knobs = "".join(f", {k}: {v}" for k, v in unlabeled.items())
    text = tiny_cvt_recipe(CHUNK, steps=2, mode=mode, extra=extra).replace(
        UNLABELED_LINE, f"    unlabeled: {{files: {files}, chunk_lines: 16, pool_batches: 2{knobs}}}\n"
    )
    return write_recipe(directory, text)


def preflight_of(recipe: Path) -> list[str]:
    host = make_host(autoload=True)
    return preflight(load_recipe(recipe, host=host), host)


def test_an_unlabeled_file_matched_twice_is_refused(tmp_path: Path) -> None:
    """`unlabeled.txt` and `unl*.txt` (or a symlink next to its target): its sentences were counted
    and trained on twice without a word."""
    recipe = recipe_with(tmp_path, "[unlabeled.txt, 'unl*.txt']")
    (problem,) = preflight_of(recipe)
    assert f"{tmp_path / 'unlabeled.txt'}: listed twice in unlabeled.files" in problem
    (tmp_path / "link.txt").symlink_to(tmp_path / "unlabeled.txt")
    with pytest.raises(DataError, match=r"link\.txt: listed twice in unlabeled\.files \(also as .*unlabeled\.txt\)"):
        UnlabeledCorpus([tmp_path / "unlabeled.txt", tmp_path / "link.txt"], 16, 10, "whitespace")


def test_bad_bytes_past_vocab_lines_stop_the_stage_before_training(tmp_path: Path) -> None:
    """With `vocab_lines`, only the first lines were read when the stage started: a bad byte further
    on stopped it when the stream reached its chunk, after training steps (hours, on a real corpus)."""
    recipe = recipe_with(tmp_path, vocab_lines="5")
    with open(tmp_path / "unlabeled.txt", "ab") as handle:
        handle.write(b"the caf\xe9 is big .\n")
    with pytest.raises(DataError, match=r"unlabeled\.txt:81: not valid UTF-8 \(byte 0xe9 at column 8\)"):
        UnlabeledCorpus([tmp_path / "unlabeled.txt"], chunk_lines=16, max_length=100, tokenizer="whitespace")
    (problem,) = preflight_of(recipe)
    assert "unlabeled.txt:81: not valid UTF-8" in problem


def test_a_nul_byte_in_unlabeled_text_is_refused_by_both_stages(tmp_path: Path) -> None:
    """It became part of a word: `cvt.vectors` wrote that word into its vectors file, which
    `cvt.train` then refused as a damaged file, naming the vectors file instead of the corpus."""
    path = tmp_path / "nul.txt"
    path.write_bytes(b"the dog runs .\nthe d\x00og sees a house .\n")
    with pytest.raises(DataError, match=r"nul\.txt:2: NUL byte at column 6"):
        UnlabeledCorpus([path], chunk_lines=16, max_length=100, tokenizer="whitespace")
    recipe = recipe_with(tmp_path, "[nul.txt]")
    vectors = recipe.read_text() + "  vectors: {kind: cvt.vectors, files: [nul.txt], dim: 4, min_count: 1}\n"
    problems = preflight_of(write_recipe(tmp_path, vectors))
    assert len(problems) == 2 and all("nul.txt:2: NUL byte at column 6" in p for p in problems)
    assert any("stage 'vectors'" in p for p in problems) and any("stage 'fit'" in p for p in problems)


@pytest.mark.parametrize("content", [b"", b"\n  \n\t\n"])
def test_unlabeled_text_without_words_is_found_in_the_pre_flight(tmp_path: Path, content: bytes) -> None:
    """Was found when the stage started: after the stages before it (an ELECTRA pre-training) trained."""
    (tmp_path / "blank.txt").write_bytes(content)
    (problem,) = preflight_of(recipe_with(tmp_path, "[blank.txt]"))
    assert f"{tmp_path / 'blank.txt'}: the text of unlabeled.files contains no words" in problem
    assert preflight_of(recipe_with(tmp_path, "[blank.txt]", task_sentences="true")) == []  # the tasks' text
    assert preflight_of(recipe_with(tmp_path, "[blank.txt]", mode="supervised")) == []  # not read


def test_a_vectors_file_of_another_dimension_is_found_in_the_pre_flight(tmp_path: Path) -> None:
    """A `vocab.vectors` file (not a stage output) was read when the stage started."""
    (tmp_path / "glove.txt").write_text("the " + " ".join(["0.1"] * 32) + "\n", encoding="utf-8")
    (problem,) = preflight_of(recipe_with(tmp_path, extra="    vocab: {vectors: glove.txt}"))
    assert f"{tmp_path / 'glove.txt'}:1: expected a word and 16 numbers (word_dim), found 32 fields" in problem
    (tmp_path / "glove.txt").write_text("1 16\nthe " + " ".join(["0.1"] * 16) + "\n", encoding="utf-8")
    assert preflight_of(recipe_with(tmp_path, extra="    vocab: {vectors: glove.txt}")) == []


def test_a_vectors_folder_that_is_no_vectors_output_is_named(tmp_path: Path) -> None:
    """Was reported as "<folder>/vectors.txt: file not found", a file the user never named, when the stage started."""
    (tmp_path / "glove").mkdir()
    (problem,) = preflight_of(recipe_with(tmp_path, extra="    vocab: {vectors: glove}"))
    assert f"{tmp_path / 'glove'}: vocab.vectors is a folder without vectors.txt" in problem


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        (
            "min_count: 1000",
            r"vocab\.min_count 1000 leaves no word in the vocabulary \(the most frequent labeled word ",
        ),
        ("char_min_count: 100000", r"vocab\.char_min_count 100000 leaves no character in the vocabulary"),
    ],
)
def test_limits_that_empty_the_vocabulary_are_refused(tmp_path: Path, knob: str, message: str) -> None:
    """Every word was <unk> (zero, untrained) or every character the char-CNN's <unk>: the model
    trained on what was left, and the stage reported its score."""
    recipe = recipe_with(tmp_path, mode="supervised", extra=f"    vocab: {{{knob}}}")
    with pytest.raises(UserError, match=message):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert not (tmp_path / "run" / "fit" / "trials" / "trial-0" / "checkpoints").exists()


def test_a_corpus_of_one_line_is_an_endless_stream(tmp_path: Path) -> None:
    """Fewer sentences than a batch: batches stay full, the one sentence repeats (no error, no hang)."""
    path = tmp_path / "one.txt"
    path.write_text("the dog runs .\n", encoding="utf-8")
    stream = UnlabeledStream(UnlabeledCorpus([path], 16, 100, "whitespace"), 4, list, seed=0, pool_batches=2)
    assert [stream.next_step()[0] for _ in range(3)] == [[["the", "dog", "runs", "."]] * 4] * 3


def test_a_target_min_count_that_leaves_no_target_word_is_refused(tmp_path: Path) -> None:
    """Every target token was <unk>: the model learned to write `<unk> <unk> ...` and the stage
    reported BLEU 0 as a result."""
    write_tiny_data(tmp_path)
    text = tiny_cvt_recipe(MT, mode="supervised", steps=2).replace("target_min_count: 1", "target_min_count: 1000")
    with pytest.raises(UserError, match=r"target_min_count 1000 leaves mt/parallel no target word \(the most frequent"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))


@pytest.mark.parametrize("edit", ["rewrite", "cut", "append"])
def test_an_unlabeled_file_edited_during_the_run_is_refused(tmp_path: Path, edit: str) -> None:
    """The chunks are byte offsets taken when the stage started: after an edit (`sed -i`, an editor's
    save, a file cut short) they pointed into other lines, and the stream went on with cut and
    mixed sentences. Lines appended after the indexed ones leave them as they were: read on."""
    path = tmp_path / "u.txt"
    path.write_text("".join(f"alpha{i} beta{i} gamma{i}\n" for i in range(40)), encoding="utf-8")
    stream = UnlabeledStream(UnlabeledCorpus([path], 8, 100, "whitespace"), 4, list, seed=0, pool_batches=1)
    stream.next_step()
    text = path.read_text(encoding="utf-8")
    if edit == "rewrite":
        path.write_text(text.replace("alpha", "a"), encoding="utf-8")
    elif edit == "cut":
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    else:
        path.write_text(text + "one more line\n", encoding="utf-8")
        assert all(len(stream.next_step()[0]) == 4 for _ in range(20))
        return
    with pytest.raises(DataError, match=r"u\.txt:\d+: the file changed since the stage indexed it"):
        for _ in range(20):  # reaches the other chunks
            stream.next_step()


def test_vectors_words_not_above_dim_is_a_recipe_error(tmp_path: Path) -> None:
    """Was found after the corpus was read, as "5 words are seen ...: too few" advising more text."""
    write_tiny_data(tmp_path)
    text = "stages:\n  vectors: {kind: cvt.vectors, files: [unlabeled.txt], dim: 8, words: 8, min_count: 1}\n"
    with pytest.raises(RecipeError, match=r"stages\.vectors\.words: 8 words cannot give 8-dimensional vectors"):
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))


def test_task_sentences_shared_by_two_tasks_are_written_once(tmp_path: Path) -> None:
    """UD POS and UD parsing on one treebank (cvt-multitask.yaml's pair) wrote every sentence twice,
    doubling its weight in the unlabeled stream; a task's own repeated sentences stay repeated."""
    from types import SimpleNamespace

    from xfer.cvt.stage import TaskData, write_task_sentences

    def task(name: str, sentences: list[str]) -> TaskData:
        train = [SimpleNamespace(id=str(i), words=s.split()) for i, s in enumerate(sentences)]
        return TaskData(name, None, SimpleNamespace(type="tagging"), train, [])  # type: ignore[arg-type]

    pos = task("ud/pos", ["the dog runs .", "a cat .", "a cat ."])
    parse = task("ud/parse", ["the dog runs .", "a cat .", "a cat .", "new one ."])
    written = write_task_sentences(tmp_path / "t.txt", [pos, parse]).read_text(encoding="utf-8").split("\n")
    assert [line for line in written if line] == ["the dog runs .", "a cat .", "a cat .", "new one ."]


def test_an_unlabeled_batch_that_grad_accum_does_not_divide_is_a_recipe_error(tmp_path: Path) -> None:
    """Was found when the stage built its unlabeled stream ("batch size 5 must be a multiple of ..."), no key named."""
    text = recipe_with(tmp_path, batch_size="5").read_text().replace("batch_size: 8,", "batch_size: 8, grad_accum: 2,")
    with pytest.raises(
        RecipeError, match=r"stages\.fit\.unlabeled\.batch_size: 5 is not a multiple of train\.grad_accum 2"
    ):
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))


def test_a_binary_word2vec_file_is_named_as_such(tmp_path: Path) -> None:
    """Its text header read, then "not valid UTF-8 at line 2" alone: the user could not tell why."""
    import struct

    path = tmp_path / "w2v.bin"
    path.write_bytes(b"2 4\nthe " + struct.pack("4f", 0.1, -0.7, 0.3, 0.9) + b"\ndog " + struct.pack("4f", *[0.5] * 4))
    with pytest.raises(DataError, match=r"w2v\.bin:2: binary data after a word2vec header: a binary word2vec file\?"):
        read_vectors(path, 4, None)
    path.write_text("2 8\nthe 0.1 0.2 0.3 0.4\n", encoding="utf-8")  # a header that contradicts word_dim
    with pytest.raises(DataError, match=r"w2v\.bin:1: the word2vec header gives 8-dimensional vectors, word_dim is 4"):
        read_vectors(path, 4, None)


def test_vocab_lines_that_are_all_blank_do_not_make_the_corpus_empty(tmp_path: Path) -> None:
    """WikiText starts with blank lines: `vocab_lines` covering only those was refused as "the
    unlabeled text contains no words (only blank lines)", though the rest of the file has words."""
    recipe = recipe_with(tmp_path, vocab_lines="2")
    text = (tmp_path / "unlabeled.txt").read_text(encoding="utf-8")
    (tmp_path / "unlabeled.txt").write_text(" \n\n" + text, encoding="utf-8")
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert (tmp_path / "run" / "fit" / "outputs" / "results" / "results.json").is_file()


def test_a_broken_symbolic_link_among_the_matches_is_named(tmp_path: Path) -> None:
    """A glob's matches that are not files were left out by the stage: a dangling link (a corpus
    part not downloaded or moved) took its text with it, without a word."""
    recipe = recipe_with(tmp_path, "['parts/*.txt']")
    (tmp_path / "parts").mkdir()
    (tmp_path / "unlabeled.txt").rename(tmp_path / "parts" / "a.txt")
    (tmp_path / "parts" / "b.txt").symlink_to(tmp_path / "gone.txt")
    (problem,) = preflight_of(recipe)
    assert f"unlabeled.files: {tmp_path / 'parts' / 'b.txt'} is a broken symbolic link" in problem


@pytest.mark.parametrize("limit", [100000, 0])
def test_vectors_without_a_labeled_word_are_refused(tmp_path: Path, limit: int) -> None:
    """Another language's or normalisation's vectors (here: every word with a suffix): every labeled
    word started random, as without the file, and the run went on as if it had vectors."""
    (tmp_path / "glove.txt").write_text(
        "".join(f"{w}x " + " ".join(["0.1"] * 16) + "\n" for w in ["the", "dog", "sees"]), encoding="utf-8"
    )
    recipe = recipe_with(
        tmp_path, mode="supervised", extra=f"    vocab: {{vectors: glove.txt, vectors_limit: {limit}}}"
    )
    with pytest.raises(DataError, match=r"glove\.txt: vocab\.vectors: none of the \d+ labeled words \(e\.g\. '\.'\)"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))


def test_a_task_listed_twice_is_refused_with_the_reason() -> None:
    """The check (core's check_distinct_tasks, shared with finetune and BAM) keeps CVT's reason."""
    from xfer.core.config import FieldError, TaskRef
    from xfer.cvt.config import CvtConfig

    with pytest.raises(
        FieldError, match=r"task 'toy/pos' is listed twice; give each task once \(one encoder, one module"
    ):
        CvtConfig(tasks=[TaskRef("toy/pos"), TaskRef("toy/pos")], mode="supervised")
