"""Local `dataset:` folders and files: document ends at file ends, the run's fingerprint, the pre-flight.

Hostile review (h190): each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from xfer.core.config import Files
from xfer.electra import data as electra_data
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

TEXTS = {
    "a.txt": "aaa aaa aaa\naaa aaa\n",  # one document per file, no blank line at the end
    "b.txt": "bbb bbb\n\nccc ccc ccc\nccc\n",  # two documents; the second ends at the file end
    "c.txt": "ddd ddd\nddd",  # no final newline
}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vocab")
    (root / "all.txt").write_text("".join(TEXTS.values()) + "\n")
    WordPieceTokenizer.train([root / "all.txt"], vocab_size=40).save(root / "vocab")
    return root / "vocab"


def words(examples, vocab: Path) -> list[str]:
    tokenizer = WordPieceTokenizer.from_dir(vocab)
    names = {i: t for t, i in tokenizer.vocab.items()}
    return [" ".join(names[i] for i in row["input_ids"]) for row in examples]


def folder_of(root: Path, texts: dict[str, str]) -> Path:
    folder = root / "corpus"
    folder.mkdir()
    for name, text in texts.items():
        (folder / name).write_bytes(text.encode())
    return folder


def build(corpus: CorpusConfig, files: list[Path], vocab: Path, cache: Path, **options):
    return build_examples(corpus, files, vocab, 64, cache, 1, 0.0, 0.0, **options)


# --- (1) a map-style load_dataset folder of .txt files ends a document at each file end -----------


def test_a_dataset_folder_of_text_files_ends_a_document_at_each_file_end(tmp_path: Path, vocab: Path) -> None:
    """Loaded as one table, the last document of a file and the first of the next were packed into one
    example ("aaa ... bbb ..."); streamed, or as `files:`, the same folder ends a document at each file end."""
    folder = folder_of(tmp_path, TEXTS)
    mapped = words(build(CorpusConfig(dataset=str(folder)), [], vocab, tmp_path / "c1"), vocab)
    streamed = words(build(CorpusConfig(dataset=str(folder), streaming=True), [], vocab, tmp_path / "c2"), vocab)
    files = sorted(folder.glob("*.txt"))
    plain = words(build(CorpusConfig(files=Files((str(folder / "*.txt"),))), files, vocab, tmp_path / "c3"), vocab)
    assert mapped == [
        "[CLS] aaa aaa aaa aaa aaa [SEP]",
        "[CLS] bbb bbb [SEP]",
        "[CLS] ccc ccc ccc ccc [SEP]",
        "[CLS] ddd ddd ddd [SEP]",
    ]
    assert mapped == plain
    assert sorted(mapped) == sorted(streamed)


def test_file_ends_cut_blocks_of_many_rows_and_max_lines(tmp_path: Path, vocab: Path) -> None:
    """With small blocks (cuts after blank rows) and a max_lines prefix, every example still holds one file's words."""
    texts = {f"{n:02d}.txt": (f"{w} {w}\n" * (n + 2)) for n, w in enumerate(["aaa", "bbb", "ccc", "ddd"] * 3)}
    folder = folder_of(tmp_path, texts)
    for options in ({}, {"max_lines": 20}):
        corpus = CorpusConfig(dataset=str(folder), **options)
        rows = words(build(corpus, [], vocab, tmp_path / f"c{len(options)}", block_rows=3), vocab)
        assert rows and all(len(set(row.split()[1:-1])) == 1 for row in rows), rows
    assert sum(len(row.split()) - 2 for row in rows) == 2 * 20  # the prefix: 20 lines of two words


def test_a_single_text_file_packs_as_before(tmp_path: Path, vocab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of one file, and a file, have no file end to cut at: their blocks are those of old."""
    folder = folder_of(tmp_path, {"only.txt": "aaa aaa\nbbb bbb\n" * 30})
    built = {}
    for name, dataset in (("folder", folder), ("file", folder / "only.txt")):
        built[name] = words(build(CorpusConfig(dataset=str(dataset)), [], vocab, tmp_path / name, block_rows=7), vocab)
    monkeypatch.setattr(electra_data, "_file_row_ends", lambda *args: [])  # the old plan
    old = words(build(CorpusConfig(dataset=str(folder)), [], vocab, tmp_path / "old", block_rows=7), vocab)
    assert built["folder"] == built["file"] == old


@pytest.mark.parametrize(
    "text", [b"", b"a\n", b"a", b"a\r\nb\rc\n", b"a\n\n\nb", b"\r\r\n\n", b"x\xc3\xa9\n\xe2\x80\xa8y\x0bz\r"]
)
def test_file_rows_are_the_text_builders_rows(tmp_path: Path, text: bytes) -> None:
    """The row counts that place the cuts must be the rows `datasets`' text builder makes of each file."""
    path = tmp_path / "f.txt"
    path.write_bytes(text)
    expected = 0
    if text:
        loaded = datasets.load_dataset("text", data_files={"train": str(path)}, split="train", cache_dir=str(tmp_path))
        expected = len(loaded)
    assert electra_data._text_rows(path) == expected


def test_an_old_cache_is_not_reused_and_counts_are_kept(
    tmp_path: Path, vocab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache built without the file cuts (before the fix) has another key; the counts are read once."""
    folder = folder_of(tmp_path, TEXTS)
    cache = tmp_path / "cache"
    corpus = CorpusConfig(dataset=str(folder))
    with monkeypatch.context() as patch:
        patch.setattr(electra_data, "_file_row_ends", lambda *args: [])
        assert len(build(corpus, [], vocab, cache)) == 2  # "aaa .. bbb ..", "ccc .. ddd .."
    assert len(build(corpus, [], vocab, cache)) == 4
    assert len(list(cache.glob("electra-examples-*"))) == 2
    monkeypatch.setattr(electra_data, "_text_rows", lambda path: pytest.fail(f"{path} counted again"))
    assert len(build(corpus, [], vocab, cache)) == 4


# --- (2) a map-style local `dataset:` edited between the run's fingerprint and the build ---------

DATASET_RECIPE = """
name: rows
seed: 1
stages:
  fit:
    kind: electra.pretrain
    corpus: {{dataset: {dataset}}}
    tokenizer: vocab
    model: tiny
    encoder: {{hidden_size: 16, num_layers: 1, num_heads: 2, intermediate_size: 32}}
    max_length: 32
    export_hf: false
    train: {{steps: 1, batch_size: 4, warmup_steps: 0, log_every: 1, checkpoint_every: 100}}
"""
LINES = ["the big dog ran home .", "a small cat saw the old tree .", "", "the river ran near the tree ."] * 6


def dataset_recipe(root: Path, dataset: str) -> Path:
    from xfer.testing import write_recipe

    WordPieceTokenizer.train([root / "words.txt"], vocab_size=60).save(root / "vocab")
    return write_recipe(root, DATASET_RECIPE.format(dataset=dataset))


def host():
    from xfer.testing import make_host

    return make_host(autoload=True)


@pytest.mark.parametrize("layout", ["file", "folder", "streamed"])
def test_a_local_dataset_edited_after_the_run_fingerprinted_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """`check_fingerprinted_corpus` compared only `files:` corpora: a `dataset:` file edited between the
    runner's fingerprint and the build was trained on under the old text's fingerprint, and a later run
    on the old text skipped the stage as done."""
    from xfer.core.errors import UserError
    from xfer.testing import run_recipe_file

    (tmp_path / "words.txt").write_text("\n".join(LINES) + "\n")
    if layout in ("file", "streamed"):
        edited = tmp_path / "rows.jsonl"
        edited.write_text("".join(json.dumps({"text": line}) + "\n" for line in LINES))
        recipe = dataset_recipe(tmp_path, "rows.jsonl" if layout == "file" else "rows.jsonl, streaming: true")
    else:
        (tmp_path / "rows").mkdir()
        (tmp_path / "rows" / "a.txt").write_text("\n".join(LINES) + "\n")
        edited = tmp_path / "rows" / "b.txt"
        edited.write_text("\n".join(LINES[:3]) + "\n")
        recipe = dataset_recipe(tmp_path, "rows")
    real = electra_data.build_examples

    def edit_then_build(*args, **kwargs):
        with open(edited, "a") as handle:
            handle.write("the old dog .\n" if layout == "folder" else json.dumps({"text": "the old dog ."}) + "\n")
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(electra_data, "build_examples", edit_then_build)
        with pytest.raises(UserError, match=rf"{edited.name}: corpus.dataset: changed after this run fingerprinted it"):
            run_recipe_file(recipe, tmp_path / "run", host())
    state = json.loads((tmp_path / "run/fit/stage.json").read_text())
    assert state["status"] == "failed" and "changed after this run fingerprinted it" in state["error"]
    run_recipe_file(recipe, tmp_path / "run", host())  # re-fingerprinted on the new text
    assert json.loads((tmp_path / "run/fit/stage.json").read_text())["status"] == "completed"
    examples = len(list((tmp_path / "run/fit/data").glob("electra-examples-*")))
    assert examples == (0 if layout == "streamed" else 1)  # its examples reused


def test_a_file_removed_from_a_dataset_folder_after_the_fingerprint_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xfer.core.errors import UserError
    from xfer.testing import run_recipe_file

    (tmp_path / "words.txt").write_text("\n".join(LINES) + "\n")
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "a.txt").write_text("\n".join(LINES) + "\n")
    (tmp_path / "rows" / "b.txt").write_text("\n".join(LINES[:3]) + "\n")
    recipe = dataset_recipe(tmp_path, "rows")
    real = electra_data.build_examples

    def remove_then_build(*args, **kwargs):
        (tmp_path / "rows" / "b.txt").unlink()
        return real(*args, **kwargs)

    monkeypatch.setattr(electra_data, "build_examples", remove_then_build)
    with pytest.raises(UserError, match=r"b.txt: corpus.dataset: was removed after this run fingerprinted it"):
        run_recipe_file(recipe, tmp_path / "run", host())


def test_a_json_lines_folder_ends_a_document_at_each_file_end(tmp_path: Path, vocab: Path) -> None:
    """The same for a folder of JSON-lines files (blank lines are no rows; a null row is a document end)."""
    rows = {"a.jsonl": ["aaa aaa aaa", "aaa aaa"], "b.jsonl": ["bbb bbb", None, "ccc ccc ccc"], "c.jsonl": ["ddd"]}
    texts = {name: "\n\n".join(json.dumps({"text": t}) for t in lines) + "\n" for name, lines in rows.items()}
    folder = folder_of(tmp_path, texts)
    mapped = words(build(CorpusConfig(dataset=str(folder)), [], vocab, tmp_path / "c1"), vocab)
    streamed = words(build(CorpusConfig(dataset=str(folder), streaming=True), [], vocab, tmp_path / "c2"), vocab)
    assert mapped == [
        "[CLS] aaa aaa aaa aaa aaa [SEP]",
        "[CLS] bbb bbb [SEP]",
        "[CLS] ccc ccc ccc [SEP]",
        "[CLS] ddd [SEP]",
    ]
    assert sorted(mapped) == sorted(streamed)


def test_a_json_array_folder_is_packed_as_one_table(tmp_path: Path, vocab: Path) -> None:
    """Files whose line counts are not their rows (a JSON array over several lines) get no cuts, not wrong ones."""
    texts = {
        name: json.dumps([{"text": t} for t in lines], indent=1)
        for name, lines in {"a.json": ["aaa aaa", "aaa"], "b.json": ["bbb"]}.items()
    }
    folder = folder_of(tmp_path, texts)
    assert words(build(CorpusConfig(dataset=str(folder)), [], vocab, tmp_path / "c"), vocab) == [
        "[CLS] aaa aaa aaa bbb [SEP]"
    ]


# --- a data_cache inside the load_dataset folder it caches ----------------------------------------


def test_an_example_cache_inside_the_dataset_folder_is_refused(tmp_path: Path, vocab: Path) -> None:
    """load_dataset reads the whole folder: from the second build on it read the cache's own Arrow copies
    of the corpus as corpus data (the corpus several times over), and each build added another copy."""
    folder = folder_of(tmp_path, TEXTS)
    corpus = CorpusConfig(dataset=str(folder))
    with pytest.raises(electra_data.DataError, match=r"corpus/cache: data_cache: the example cache is inside"):
        build(corpus, [], vocab, folder / "cache")
    assert not (folder / "cache" / "hf-datasets").exists()


def test_a_hidden_example_cache_inside_the_dataset_folder_is_refused_too(tmp_path: Path, vocab: Path) -> None:
    """Not read by load_dataset, but signed by the run's fingerprint with the folder: the stage ran again
    at every `xfer run` ("its input files changed while it ran")."""
    folder = folder_of(tmp_path, TEXTS)
    with pytest.raises(electra_data.DataError, match=r"\.cache: data_cache: the example cache is inside"):
        build(CorpusConfig(dataset=str(folder), streaming=True), [], vocab, folder / ".cache")


def test_file_ends_follow_the_files_of_the_split_in_load_dataset_order(tmp_path: Path, vocab: Path) -> None:
    """A split folder (train/, test/), nested files: the cuts are at the ends of the split's files, in
    the order load_dataset reads them."""
    folder = tmp_path / "corpus"
    for name, text in {
        "train/z.txt": "aaa aaa\naaa",
        "train/sub/m.txt": "bbb bbb\n",
        "train/b.txt": "ccc\n\nddd ddd\n",
        "test/a.txt": "aaa bbb ccc\n",
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    loaded = datasets.load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "hf"))
    mapped = words(build(CorpusConfig(dataset=str(folder)), [], vocab, tmp_path / "c"), vocab)
    assert loaded["text"] == ["ccc", "", "ddd ddd", "bbb bbb", "aaa aaa", "aaa"]  # b.txt, sub/m.txt, z.txt
    assert mapped == ["[CLS] ccc [SEP]", "[CLS] ddd ddd [SEP]", "[CLS] bbb bbb [SEP]", "[CLS] aaa aaa aaa [SEP]"]


def test_an_example_cache_inside_a_save_to_disk_folder_is_refused(tmp_path: Path, vocab: Path) -> None:
    """Read correctly, but signed with the folder by the run's fingerprint: the cache written while the stage
    ran made it stale, and the completed stage pre-trained again at the next `xfer run`."""
    datasets.Dataset.from_dict({"text": ["aaa aaa", "", "bbb"]}).save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(electra_data.DataError, match=r"saved/data: data_cache: the example cache is inside"):
        build(CorpusConfig(dataset=str(tmp_path / "saved")), [], vocab, tmp_path / "saved" / "data")


def test_the_pre_flight_reports_a_data_cache_inside_the_dataset_folder(tmp_path: Path) -> None:
    """`xfer run` refuses it before any stage trains, naming data_cache (not only when the stage starts)."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import check_data
    from xfer.testing import write_recipe

    (tmp_path / "words.txt").write_text("\n".join(LINES) + "\n")
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "a.txt").write_text("\n".join(LINES) + "\n")
    recipe = dataset_recipe(tmp_path, "rows")
    text = recipe.read_text().replace("    max_length: 32\n", "    max_length: 32\n    data_cache: rows/cache\n")
    recipe = write_recipe(tmp_path, text)
    with pytest.raises(RecipeError, match=r"rows/cache: data_cache: the example cache is inside the dataset folder"):
        check_data(load_recipe(recipe, [], host()), host())
