"""`xfer score CHECKPOINT [FILE]`: the pseudo-log-likelihood of every line of a file, and n-best re-ranking.

    xfer score runs/pre/fit/outputs/discriminator sentences.txt --out plls.jsonl
    xfer score CKPT --nbest-dev dev.nbest.jsonl --nbest-test test.nbest.jsonl --metric wer --rerank-dir rr/

FILE may also come after the options (`xfer score CKPT --out o.jsonl FILE`, or `-- FILE`).
FILE is plain text (one text per line) or `.jsonl` / `.json` / `.ndjson` (an object with a `text`
field per line; an `id` is carried over); a file read as text whose first line is a JSON object
is refused (pass `--format`). Output: one JSON object per input line, in input order —
`{"line", "id"?, "pll", "tokens", "method", "windows"?, "empty"?}` (with `--pieces`, also the
word pieces and per-piece scores) — to `--out` (written atomically) or stdout; a summary (method,
checkpoint, counts incl. [UNK] pieces, lines/s) goes to stderr. Texts longer than max_length are scored in
overlapping windows (every piece once, with context; the record says how many windows); an empty
line is an error naming file:line unless `--empty zero`. See `xfer.electra.scoring` for the methods
and `xfer.electra.rerank` for the n-best schema. Bad input exits with code 2 and a message, and
so does a PLL that is not a finite number (a diverged checkpoint), naming file and line. No output
path (`--out`, the files `--rerank-dir` writes) may be an input or another output, and `--out`
may not be one of the model's files (`vocab.txt`, weights, ...): that is refused before the
model loads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

METHOD_CHOICES = ("auto", "electric", "mlm", "electra-tt", "two-tower")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0] if __doc__ else None
    parser.add_argument("checkpoint", type=Path, help="model folder: an electra.pretrain `discriminator` output")
    parser.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="texts to score: .txt (one per line) or .jsonl/.json/.ndjson (a `text` field)",
    )
    parser.add_argument("--generator", type=Path, help="generator folder (default: `generator/` next to CHECKPOINT)")
    parser.add_argument(
        "--method",
        choices=METHOD_CHOICES,
        default="auto",
        help="auto (from the checkpoint's objective), electric (1 pass), mlm (n passes), electra-tt, two-tower",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass (default 64)")
    parser.add_argument("--max-length", type=int, help="longest input in tokens incl. [CLS]/[SEP]; longer: windows")
    parser.add_argument(
        "--format",
        choices=("auto", "text", "jsonl"),
        default="auto",
        help="input format (auto: by suffix; a 'text' file whose first line is a JSON object is refused)",
    )
    parser.add_argument("--text-field", help="the JSONL field holding the text (default text; JSONL input only)")
    parser.add_argument(
        "--empty", choices=("error", "zero"), default="error", help="an empty line: error (default) or PLL 0"
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="fp32 (default; PLLs move by ~1e-5 with batch composition, not bit-exact) or bf16 (faster, coarser)",
    )
    parser.add_argument("--pieces", action="store_true", help="also write each line's word pieces and their scores")
    parser.add_argument("--out", type=Path, help="output JSONL file (default: stdout)")
    parser.add_argument("--device", default="auto", help="auto (a GPU if any), cpu, cuda, cuda:1, ...")
    rerank = parser.add_argument_group("n-best re-ranking (total = base score + λ·PLL, λ chosen on dev)")
    rerank.add_argument("--nbest-dev", type=Path, help="JSONL n-best lists with references (chooses λ)")
    rerank.add_argument("--nbest-test", type=Path, help="JSONL n-best lists re-ranked with the dev λ")
    rerank.add_argument("--metric", choices=("bleu", "wer"), help="bleu (sacrebleu corpus BLEU) or wer")
    rerank.add_argument("--lambdas", help="comma-separated λ grid (default 0,0.05,...,1)")
    rerank.add_argument("--rerank-dir", type=Path, help="folder for dev.jsonl, test.jsonl and report.json")
    _take_file_after_options(parser)


def _take_file_after_options(parser: argparse.ArgumentParser) -> None:
    """Let FILE come after options: `xfer score CKPT --out o.jsonl a.txt` and `xfer score CKPT --out o.jsonl -- a.txt`.

    argparse fills the optional positional FILE (with nothing) as soon as it meets the first
    option, and then rejects a later path as "unrecognized arguments". core/cli.py's `_parse`
    repairs the same thing for `xfer run`'s overrides, but on the top-level parser; this is a
    sub-parser, whose `parse_known_args` the top-level parser calls, so the repair is here: when
    FILE is unset, one leftover path (or `--` and one path) becomes FILE. Anything else left over,
    such as a second path, stays unrecognized and is still an error.
    """
    parse = parser.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        namespace, extra = parse(args, namespace)
        if getattr(namespace, "file", None) is None:
            if len(extra) == 2 and extra[0] == "--":
                namespace.file, extra = Path(extra[1]), []
            elif len(extra) == 1 and not extra[0].startswith("-"):
                namespace.file, extra = Path(extra[0]), []
        return namespace, extra

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from xfer.core import distributed as dist
    from xfer.electra import rerank, scoring

    grid = rerank.parse_grid(args.lambdas) if args.lambdas is not None else list(rerank.DEFAULT_LAMBDAS)
    # read and check every input before loading the model: a typo in a file fails fast, before anything is written
    text_field = args.text_field or "text"
    lines = scoring.read_texts(args.file, args.format, text_field) if args.file is not None else None
    dev = rerank.read_nbest(args.nbest_dev, need_reference=True) if args.nbest_dev is not None else None
    test = rerank.read_nbest(args.nbest_test) if args.nbest_test is not None else None
    if dev is not None:  # as the stage's pre-flight: BLEU against dev references without a word ties every λ
        rerank.check_dev_references(args.metric, dev)
    if test is not None:
        rerank.check_references(args.metric, test)
        rerank.check_held_out([args.nbest_dev], [args.nbest_test])  # a test result on the dev lists is no test
    if args.empty == "error":  # what the stage's preflight checks; found while scoring, it came after --out was written
        blank = next((e for e in (scoring.blank_hypothesis(x) for x in (dev, test) if x is not None) if e), None)
        if blank is not None:
            raise blank

    _prepare_outputs(args)  # an unwritable output fails now, not after the scoring
    loaded = scoring.load_scorer(
        args.checkpoint, args.generator, args.method, dist.select_device(args.device), args.max_length
    )
    log = _stderr
    log(f"method: {loaded.describe()}")
    for note in loaded.notes:
        log(f"note: {note}")

    # score everything, then write: an error in the n-best lists (a text that tokenizes to nothing,
    # a non-finite PLL) must not leave a fresh --out next to an old --rerank-dir
    if lines is not None:
        started = time.perf_counter()
        scores = scoring.score_lines(loaded, lines, args.batch_size, args.empty, args.precision)
        seconds = time.perf_counter() - started
    result = None
    if dev is not None:
        groups = [dev] if test is None else [dev, test]
        counts: dict[str, int] = {}
        plls = scoring.score_nbest(loaded, groups, args.batch_size, args.empty, args.precision, counts=counts)
        result = rerank.rerank_nbest(args.metric, dev, plls[0], test, plls[1] if test is not None else None, grid)

    if lines is not None:
        tokenizer = loaded.tokenizer if args.pieces else None
        records = [scoring.record(li, s, loaded.method, tokenizer) for li, s in zip(lines, scores, strict=True)]
        _write(records, args.out)
        windowed = sum(1 for s in scores if s.windows > 1)
        empty = sum(1 for s in scores if s.empty)
        unknown = scoring.unknown_pieces(loaded, scores)
        log(
            f"scored {len(lines)} lines ({sum(s.tokens for s in scores)} pieces) of {args.file} in {seconds:.2f}s "
            f"({len(lines) / max(seconds, 1e-9):.1f} lines/s)"
            + (f"; {windowed} longer than max_length {loaded.max_length}, scored in windows" if windowed else "")
            + (f"; {empty} empty, scored 0" if empty else "")
            + (f"; {unknown} [UNK] pieces (out of the vocabulary; each scored as [UNK])" if unknown else "")
        )

    if result is not None:
        log(f"n-best lists: scored {scoring.describe_counts(counts, loaded.max_length)}")
        if args.rerank_dir is not None:
            _write_rerank_dir(args, result, loaded.method)
            log(f"re-ranked lists and report.json written to {args.rerank_dir}")
        print(result.markdown(), file=sys.stderr if args.file is not None and args.out is None else sys.stdout)
    return 0


def _write_rerank_dir(args: argparse.Namespace, result: Any, method: str) -> None:
    """dev.jsonl, test.jsonl (with --nbest-test) and report.json, so that the folder describes this run only.

    A test.jsonl left by an earlier run with --nbest-test would sit next to a report.json that says
    nothing about it: it is removed, unless it is this run's --out or an input (allowed when this
    run writes no test.jsonl). report.json goes first and is written last, so a failure halfway
    leaves no report describing files of two runs.
    """
    from xfer.core.atomic import write_json
    from xfer.core.errors import UserError
    from xfer.electra import rerank

    folder = args.rerank_dir
    keep = [p for p in (args.out, args.file, args.nbest_dev, args.nbest_test) if p is not None]
    stale = [folder / "report.json"]
    if result.test_records is None:
        stale.append(folder / "test.jsonl")
    try:
        for path in stale:
            if not any(_same_file(path, k) for k in keep):
                path.unlink(missing_ok=True)
        rerank.write_jsonl(folder / "dev.jsonl", result.dev_records)
        if result.test_records is not None:
            rerank.write_jsonl(folder / "test.jsonl", result.test_records)
        write_json(folder / "report.json", {"method": method, **result.report()})
    except OSError as error:
        raise UserError(f"--rerank-dir {folder}: cannot write: {error.strerror or error}") from None


def _check_args(args: argparse.Namespace) -> None:
    """Argument mistakes argparse cannot see, before anything is loaded."""
    from xfer.core import hub
    from xfer.core.errors import UserError

    for name in ("checkpoint", "generator"):  # a Hub id (`google/electra-small-generator`) from the local HF cache
        given = getattr(args, name)
        if given is not None and not given.exists():
            snapshot = hub.cached_snapshot(str(given))
            if snapshot is None and hub.looks_like_hub_id(str(given)):
                raise UserError(f"{given}: no such folder{hub.not_cached_hint(str(given))}")
            setattr(args, name, snapshot or given)
    if args.file is None and args.nbest_dev is None:
        raise UserError("nothing to do: give a FILE to score and/or --nbest-dev (n-best lists to re-rank)")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.max_length is not None and args.max_length < 3:
        raise UserError(f"--max-length {args.max_length} cannot hold [CLS], one piece and [SEP]")
    if args.nbest_dev is None:
        for flag, value in (
            ("--nbest-test", args.nbest_test),
            ("--metric", args.metric),
            ("--lambdas", args.lambdas),
            ("--rerank-dir", args.rerank_dir),
        ):
            if value is not None:
                raise UserError(f"{flag} needs --nbest-dev (λ is chosen on the dev lists)")
    elif args.metric is None:
        raise UserError("--nbest-dev needs --metric bleu or --metric wer")
    if args.generator is not None and args.method == "electric":
        raise UserError("--generator: method electric scores with the checkpoint alone and would ignore it")
    if args.text_field is not None:
        _check_text_field(args)
    inputs = [
        (flag, path)
        for flag, path in (("FILE", args.file), ("--nbest-dev", args.nbest_dev), ("--nbest-test", args.nbest_test))
        if path is not None
    ]
    if args.out is not None:
        if args.file is None:
            raise UserError("--out is where FILE's scores go: give a FILE")
        if any(_same_file(args.out, path) for _, path in inputs):
            raise UserError(f"--out {args.out} is an input file: it would be overwritten")
        model = _model_folder(args.out, args)
        if model is not None:
            raise UserError(f"--out {args.out} is a file of the model in {model}: it would be overwritten")
        if args.out.is_dir():
            raise UserError(f"--out {args.out} is a folder: give a file name")
    if args.rerank_dir is not None:
        # the same rule as --out: no output may replace an input, or another output
        written = ["dev.jsonl", *(["test.jsonl"] if args.nbest_test is not None else []), "report.json"]
        protected = inputs + ([("--out", args.out)] if args.out is not None else [])
        for name in written:
            clash = next(
                (f"{flag} {path}" for flag, path in protected if _same_file(args.rerank_dir / name, path)), None
            )
            if clash is not None:
                raise UserError(
                    f"--rerank-dir {args.rerank_dir}: its {name} would overwrite {clash}: choose another folder"
                )


def _check_text_field(args: argparse.Namespace) -> None:
    """--text-field only means something for a JSONL FILE; elsewhere it would be ignored, silently."""
    from xfer.core.errors import UserError
    from xfer.electra.scoring import input_format

    if args.file is None:
        raise UserError("--text-field names the text field of a JSONL FILE: give a FILE")
    if input_format(args.file, args.format) == "text":
        raise UserError(
            f"--text-field {args.text_field}: {args.file} is read as plain text (one text per line, no fields); "
            "if it is JSON lines, pass --format jsonl"
        )
    if not args.text_field.strip():
        raise UserError("--text-field must name a field")


MODEL_FILES = (
    "xfer_model.json",
    "config.json",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "model.safetensors.index.json",
)
"""Names of the files a model folder (xfer or HF) is loaded from, besides its weights (`WEIGHT_SUFFIXES`)."""
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def _model_folder(path: Path, args: argparse.Namespace) -> Path | None:
    """The model folder (checkpoint, generator, or the `generator/` next to the checkpoint) that
    `path` names one of the model files of (`MODEL_FILES`, weights), or None. They are inputs too:
    `--out CKPT/vocab.txt` replaced the checkpoint's vocabulary with the scores, after loading it,
    and the model could not be loaded again. Other files there (scores kept next to the model) may
    be written."""
    folders = [args.checkpoint, args.generator, args.checkpoint.parent / "generator"]
    # resolved (links, `..`) or as written (a Hub snapshot's files are links to its blobs)
    for target, resolve in ((path.resolve(), Path.resolve), (Path(os.path.abspath(path)), Path.absolute)):
        if target.name not in MODEL_FILES and target.suffix not in WEIGHT_SUFFIXES:
            continue
        for folder in (f for f in folders if f is not None and f.is_dir()):
            if target.parent == Path(os.path.normpath(resolve(folder))):
                return folder
    return None


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: resolved (symlinks, `..`), or an existing hard link."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _prepare_outputs(args: argparse.Namespace) -> None:
    """Create the output folders; a path that cannot be written is a UserError, not a traceback."""
    from xfer.core.errors import UserError

    if args.rerank_dir is not None and args.rerank_dir.exists() and not args.rerank_dir.is_dir():
        raise UserError(f"--rerank-dir {args.rerank_dir}: exists and is not a folder")
    for flag, folder in (("--out", args.out.parent if args.out else None), ("--rerank-dir", args.rerank_dir)):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"{flag}: cannot create {folder}: {error.strerror or error}") from None


def _write(records: list[dict[str, Any]], out: Path | None) -> None:
    import json

    if out is None:
        for record in records:  # allow_nan=False: NaN is not JSON (scoring refuses it; this is a backstop)
            sys.stdout.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        sys.stdout.flush()
        return
    from xfer.core.errors import UserError
    from xfer.electra.rerank import write_jsonl

    try:
        write_jsonl(out, records)
    except OSError as error:
        raise UserError(f"--out {out}: cannot write: {error.strerror or error}") from None


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)
