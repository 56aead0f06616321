"""The `electra.score` stage: PLLs of text files, and n-best re-ranking, inside a recipe.

Output `scores/`:

  <file>.jsonl        one record per scored line: {"line", "id"?, "pll", "tokens", "method",
                      "windows"? (when the text needed more than one window), "empty"?}
                      (when two inputs share a stem, every name gets its input's index as a prefix,
                      `00-a.jsonl`, `01-a.jsonl`, ...: unique whatever the stems; summary.json maps them)
  rerank/dev.jsonl    re-ranked dev lists (schema: `xfer.electra.rerank`), and test.jsonl; with
                      several n-best files a list without an id is named "<file>:<line>", and an id
                      given in two files is an error naming both (`rerank.merge_nbest`)
  rerank/report.json  metric, λ, sacrebleu signature, dev/test before/after, the dev metric per λ
                      ("note" when every λ tied: λ was then no choice; or when λ is at the
                      grid's edge: the best λ may lie beyond it)
  summary.json        method, checkpoint, generator, max_length and what each input held (lines,
                      windowed, empty, unk: [UNK] pieces); with re-ranking, the same of the distinct
                      n-best hypotheses (rerank.scored)

The report gets the method, the counts, the speed and the re-ranking table. Every rank scores
its share of the texts (DDP under torchrun), rank 0 writes. Scoring is deterministic for the same
inputs, batch size and number of ranks, so a re-run (after a kill) writes the same files again;
another batch size or rank count moves PLLs by ~1e-5 (see `xfer.electra.scoring`). A PLL that is
not finite (a diverged checkpoint) stops the stage with an error naming file and line (and, for
n-best lists, the list id and hypothesis): NaN is not JSON, and NaN totals would re-rank silently.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from xfer.core import distributed as dist
from xfer.core.atomic import write_json
from xfer.core.stage import StageContext
from xfer.core.textfile import check_distinct
from xfer.electra import rerank, scoring
from xfer.electra.score_config import ScoreConfig


def run_score(ctx: StageContext) -> None:
    config: ScoreConfig = ctx.config
    loaded = scoring.load_scorer(
        ctx.resolve(config.checkpoint),
        ctx.resolve(config.generator) if config.generator is not None else None,
        config.method,
        ctx.device,
        config.max_length,
    )
    out = ctx.output_dir("scores")
    options: dict[str, Any] = {
        "batch_size": config.batch_size,
        "empty": config.empty,
        "precision": config.precision,
        "rank": dist.rank(),
        "world_size": dist.world_size(),
    }
    summary: dict[str, Any] = {
        "method": loaded.method,
        "checkpoint": str(loaded.checkpoint),
        "generator": str(loaded.generator) if loaded.generator else None,
        "max_length": loaded.max_length,
        "notes": loaded.notes,
        "files": [],
    }
    report = [f"## PLL scoring\n\nMethod: {loaded.describe()}.\n"]
    report += [f"- {note}\n" for note in loaded.notes]

    files = ctx.resolve_files(config.files, suffixes=(".txt", ".jsonl")) if config.files is not None else []
    if config.files is not None and not files:
        from xfer.core.errors import UserError

        raise UserError("files: no .txt or .jsonl file found to score")
    # a file matched by two patterns (`a.txt` and `*.txt`) was scored twice, and its repeated stem
    # renamed every output (`b.jsonl` became `02-b.jsonl`)
    check_distinct(files, "files")
    config.check_text_field(files)
    rows = []
    for path, name in zip(files, output_names(files), strict=True):
        lines = scoring.read_texts(path, config.format, config.text_field, recipe=True)
        started = time.perf_counter()
        scores = scoring.score_lines(loaded, lines, **options)
        seconds = time.perf_counter() - started
        windowed = sum(1 for s in scores if s.windows > 1)
        empty = sum(1 for s in scores if s.empty)
        if ctx.is_main:
            rerank.write_jsonl(
                out / name, [scoring.record(li, s, loaded.method) for li, s in zip(lines, scores, strict=True)]
            )
        unknown = scoring.unknown_pieces(loaded, scores)
        summary["files"].append(
            {
                "input": str(path),
                "output": name,
                "lines": len(lines),
                "windowed": windowed,
                "empty": empty,
                "unk": unknown,
            }
        )
        rows.append(
            f"| {path.name} | {len(lines)} | {sum(s.tokens for s in scores)} | {windowed} | {empty} | "
            f"{len(lines) / max(seconds, 1e-9):.1f} |"
        )
    if rows:
        report.append(
            "\n| file | lines | tokens | windowed | empty | lines/s |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows)
            + "\n"
        )

    if config.nbest_dev is not None:
        counts: dict[str, int] = {}
        result = _rerank(ctx, config, loaded, {**options, "counts": counts})
        if ctx.is_main:
            folder = out / "rerank"
            folder.mkdir(parents=True, exist_ok=True)
            rerank.write_jsonl(folder / "dev.jsonl", result.dev_records)
            if result.test_records is not None:
                rerank.write_jsonl(folder / "test.jsonl", result.test_records)
            write_json(folder / "report.json", {"method": loaded.method, **result.report()})
        summary["rerank"] = {"lambda": result.lam, "metric": result.metric, "scored": counts}
        report.append("\n" + result.markdown())
        report.append(f"\nn-best lists: scored {scoring.describe_counts(counts, loaded.max_length)}.\n")
    if ctx.is_main:
        write_json(out / "summary.json", summary)
        ctx.report("".join(report))


def _rerank(
    ctx: StageContext, config: ScoreConfig, loaded: scoring.LoadedScorer, options: dict[str, Any]
) -> rerank.RerankResult:
    assert config.nbest_dev is not None and config.metric is not None
    dev_paths = _nbest_paths(ctx, config.nbest_dev, "nbest_dev")
    test_paths = _nbest_paths(ctx, config.nbest_test, "nbest_test") if config.nbest_test is not None else []
    rerank.check_held_out(dev_paths, test_paths)
    dev = rerank.merge_nbest([rerank.read_nbest(path, need_reference=True) for path in dev_paths])
    test = None
    if config.nbest_test is not None:
        test = rerank.merge_nbest([rerank.read_nbest(path) for path in test_paths])
    groups = [dev] if test is None else [dev, test]
    plls = scoring.score_nbest(loaded, groups, **options)
    return rerank.rerank_nbest(config.metric, dev, plls[0], test, plls[1] if test is not None else None, config.lambdas)


def _nbest_paths(ctx: StageContext, files: Any, key: str) -> list[Path]:
    """The n-best files of `files` (the config's `key`). None found (a stage output without .jsonl
    files) said only "no .jsonl n-best file found": not whether dev or test, nor where."""
    from xfer.core.errors import UserError

    paths = ctx.resolve_files(files, suffixes=(".jsonl",))
    if not paths:
        raise UserError(f"{key}: no .jsonl n-best file found in {files}")
    return paths


def output_names(paths: list[Path]) -> list[str]:
    """`<stem>.jsonl` for each input when the stems are distinct; else `<index>-<stem>.jsonl` for every input.

    Prefixing only the repeated stems could produce another input's own name (x/a.txt, y/a.txt and
    z/00-a.txt gave 00-a.jsonl twice, and one input's scores were lost). With every name prefixed,
    the part before the first "-" is the input's index, so names differ by construction. Stems are
    compared casefolded: A.txt and a.txt would be one file on a case-insensitive file system.
    """
    stems = [p.stem for p in paths]
    if len({s.casefold() for s in stems}) == len(stems):
        return [f"{s}.jsonl" for s in stems]
    return [f"{i:02d}-{s}.jsonl" for i, s in enumerate(stems)]
