"""The `xfer` command line.

    xfer run RECIPE [key=value ...] [--run-dir DIR] [--fork NEW | --force] [--device auto] [--only STAGES]
    xfer validate RECIPE [key=value ...]      check everything, run nothing
    xfer validate RECIPE RECIPE ...           each of them; the exit code is the worst one
    xfer validate RECIPE --data               ... and read every task's data files (the run's pre-flight)
    xfer show RECIPE [key=value ...]          resolved recipe, with where each value came from
    xfer status RUN_DIR                       stages, their status and checkpoints
    xfer plugins [--check] [--json]           distributions, versions, hooks, components, failures
    xfer components [KIND] [--json]           registered component names
    xfer explain KIND NAME                    a component's config fields, defaults and docs
    xfer new-plugin NAME [--dir DIR]          scaffold a third-party plugin distribution

Plugins add sub-commands through the `xfer_commands` hook. Bad input exits with code 2 and a
message (no traceback); a diverged training run exits with code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import inspect
import json
import math
import os
import signal
import sys
import threading
import typing
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from xfer.core.errors import PluginError, RecipeError, UserError
from xfer.core.plugins import PluginHost, default_host
from xfer.core.specs import KINDS, import_object


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """The `RECIPE [key=value ...]` positionals of every command that reads a recipe (plugins' too).

    `default=[]` keeps argparse from listing the optional overrides as required ("the following
    arguments are required: recipe, key=value" when only the recipe was missing)."""
    parser.add_argument("recipe", type=Path, help="recipe YAML file")
    parser.add_argument(
        "overrides", nargs="*", default=[], metavar="key=value", help="overrides, e.g. stages.finetune.train.lr=3e-4"
    )


def versions(host: PluginHost) -> str:
    """`xfer --version`: the core's version and every loaded plugin distribution's."""
    lines = [f"xfer {host._own_distribution()[1]}"]
    seen = {("xfer-core", host._own_distribution()[1])}
    for record in host.plugins.values():
        if (record.distribution, record.version) in seen or record.distribution.startswith("("):
            continue
        seen.add((record.distribution, record.version))
        lines.append(f"  {record.distribution} {record.version}{' (failed to load)' if record.error else ''}")
    return "\n".join(lines)


def _command_word(argv: list[str]) -> str | None:
    """The sub-command named on the command line (the first argument that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _nearest(word: str, names: Iterable[str]) -> str | None:
    """The name closest to a mistyped `word` (difflib's ratio of at least 0.6), or None."""
    import difflib

    found = difflib.get_close_matches(word, [str(name) for name in names], n=1)
    return found[0] if found else None


class _Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a mistyped choice: `xfer rn` listed all 13 commands (and
    `xfer explain stag ...` every kind) without naming the one meant. Sub-command parsers, plugins'
    included, are of this class too (`add_subparsers` makes them of their parent's class)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = ", ".join(map(repr, action.choices))
        nearest = _nearest(str(value), action.choices) if isinstance(value, str) else None
        hint = f"; did you mean {nearest!r}?" if nearest is not None else ""
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {choices})")


class _JoinStages(argparse.Action):
    """`--only a --only b` is `--only a,b`: a second `--only` silently replaced the first, so b ran
    alone and a was "not selected (--only), left as it is". The value stays one comma-separated string."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, option: Any = None
    ) -> None:
        previous = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, value if previous is None else f"{previous},{value}")


def build_parser(host: PluginHost, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; a plugin command's `configure` is imported only when that command is invoked
    (`argv`), so a broken plugin command breaks only itself and `xfer --help` stays fast."""
    parser = _Parser(
        prog="xfer",
        description="Efficient transfer learning for NLP, run from YAML recipes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps --version's one line per package
    )
    parser.add_argument("--version", action="version", version=versions(host))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a recipe (skips completed stages, resumes interrupted ones)")
    add_recipe_arguments(run)
    run.add_argument("--run-dir", type=Path, help="run directory (default: runs/<recipe name>)")
    group = run.add_mutually_exclusive_group()
    group.add_argument(
        "--fork", type=Path, metavar="NEW_DIR", help="copy the run directory and run the changed recipe there"
    )
    group.add_argument("--force", action="store_true", help="accept a changed recipe: re-run changed stages in place")
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument(
        "--only",
        action=_JoinStages,
        metavar="STAGE[,STAGE]",
        help="run only these stages and the stages they read from (others are left as they are); may be repeated",
    )

    validate = sub.add_parser(
        "validate",
        help="validate a recipe without running it",
        epilog="Several recipes (`xfer validate recipes/*.yaml`) are each validated, with the same overrides; "
        "the exit code is the worst one.",
    )
    add_recipe_arguments(validate)
    validate.add_argument(
        "--data",
        action="store_true",
        help="also read every task's data files and report the first problem in each split",
    )
    show = sub.add_parser("show", help="print the resolved recipe and where each value came from")
    add_recipe_arguments(show)

    status = sub.add_parser("status", help="show the stages of a run directory")
    status.add_argument("run_dir", type=Path, help="a run directory (runs/<recipe name>, or a run's --run-dir)")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")

    results = sub.add_parser("results", help="print the dev results of runs or stages as one Markdown table")
    results.add_argument(
        "paths",
        nargs="+",
        metavar="RUN_OR_STAGE_DIR",
        help="a run or stage folder; A+B pools the trials of same-named stages of runs A and B (e.g. seeds run apart)",
    )

    plugins = sub.add_parser("plugins", help="list plugins, their hooks and components")
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a listing")
    plugins.add_argument(
        "--check",
        action="store_true",
        help="also import every component's config and target and report problems (exit 1 if any)",
    )

    components = sub.add_parser("components", help="list registered components")
    components.add_argument("kind", nargs="?", choices=KINDS, help="only components of this kind")
    components.add_argument("--json", action="store_true", help="print JSON instead of a listing")

    explain = sub.add_parser("explain", help="document a component's config")
    explain.add_argument("kind", choices=KINDS, help="the component's kind")
    explain.add_argument("name", help="its registered name, e.g. transformer.finetune (see xfer components)")

    new_plugin = sub.add_parser("new-plugin", help="scaffold a plugin distribution")
    new_plugin.add_argument("name", help="plugin namespace, e.g. mytasks")
    new_plugin.add_argument("--dir", type=Path, default=None, help="where to create it (default: ./xfer-<name>)")

    wanted = _command_word(sys.argv[1:] if argv is None else argv)
    for command in host.commands():
        if command.name in sub.choices:
            warnings.warn(
                f"plugin {command.provider!r}: command {command.name!r} is already defined; ignored", stacklevel=1
            )
            continue
        extra = sub.add_parser(command.name, help=command.help)
        extra.set_defaults(_plugin_run=command.run, _plugin_command=command)
        if command.name == wanted:
            try:
                import_object(command.configure)(extra)
            except Exception as exc:
                raise PluginError(
                    f"command {command.name!r} from plugin {command.provider!r} is broken: "
                    f"{type(exc).__name__}: {exc} (in {command.configure})"
                ) from None
    # `xfer run --help` said nothing of what the command does (only `xfer --help` listed that): each
    # sub-command's own help leads with its one-line summary, unless it has a description of its own
    for choice in sub._choices_actions:
        command_parser = sub.choices[choice.dest]
        if command_parser.description is None:
            command_parser.description = choice.help
    # No option abbreviations (`--for` for `--fork`): a typo must not silently become another
    # flag, and a flag added later must not change what an existing abbreviation meant.
    for command_parser in (parser, *sub.choices.values()):
        command_parser.allow_abbrev = False
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, letting `key=value` overrides also come after options (`xfer run r.yaml --run-dir D a.b=1`).

    argparse stops filling a `nargs="*"` positional at the first option, so overrides written
    after one would otherwise be rejected as unrecognized arguments.
    """
    args, extra = parser.parse_known_args(argv)
    if hasattr(args, "overrides"):
        trailing, extra = _trailing_overrides(extra)
        args.overrides = [*args.overrides, *trailing]
    if extra:
        # the sub-command's parser says it (its usage, not `xfer COMMAND ...`'s) with the option meant
        command = _command_parser(parser, args)
        options = [o for action in command._actions for o in action.option_strings if o.startswith("--")]
        typo = next((a.partition("=")[0] for a in extra if a.startswith("--")), None)
        nearest = _nearest(typo, options) if typo is not None else None
        hint = f"; did you mean {nearest}?" if nearest is not None else ""
        command.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    return args


def _trailing_overrides(extra: list[str]) -> tuple[list[str], list[str]]:
    """(the overrides among the arguments argparse left over after an option, the rest).

    Every word that is no option is an override, as it is before the options: `--run-dir D a.b`
    (the `=` forgotten) was "unrecognized arguments: a.b" instead of the override's own diagnostic,
    and `--run-dir D -- a.b=1` (the usual end of options) "unrecognized arguments: --". Next to an
    unknown option only `key=value` words are taken: the word after it may be that option's value
    (`--onyl a`), which the usage error must show with it."""
    end = extra.index("--") if "--" in extra else len(extra)
    before, after = extra[:end], extra[end + 1 :]
    if any(a.startswith("-") for a in before):
        return [a for a in extra if "=" in a and not a.startswith("-")], [
            a for a in extra if "=" not in a or a.startswith("-")
        ]
    return [*before, *after], []


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)sub-command `args` names: `xfer vocab train`'s for `xfer vocab train ...`."""
    while True:
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, action.dest, None) if action is not None else None
        if action is None or name not in action.choices:
            return parser
        parser = action.choices[name]


_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})
"""OSErrors that say something about the machine (a full disk, a quota, a file-size limit, a read-only
or forbidden folder), not about xfer: reported in one line, like bad input, instead of with a traceback."""


def _reported_errno(exc: BaseException) -> int | None:
    """The OS error number a library names in the message of an exception that is no OSError:
    safetensors (Rust) raises SafetensorError("... I/O error: No space left on device (os error 28)")."""
    import re

    found = re.search(r"\(os error (\d+)\)", str(exc))
    return int(found.group(1)) if found else None


class Terminated(KeyboardInterrupt):
    """SIGTERM during `xfer run` (a scheduler's or `kill`'s polite stop): raised in the main thread so
    the run stops like Ctrl-C — the stage is marked interrupted, the run lock released, exit 143 —
    instead of dying without a word. Resuming is exact either way (from the last checkpoint)."""


@contextlib.contextmanager
def _sigterm_stops_like_ctrl_c() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Terminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_PYTHON_FORMAT = warnings.formatwarning


def _format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """`warning: MESSAGE` for the warnings xfer gives users (its own code's or its own classes,
    e.g. tags unseen in training): Python's `FILE:LINE: Category: MESSAGE` and source line name
    xfer's internals, not the user's problem. Other libraries' warnings keep Python's format."""
    if category.__module__.startswith("xfer.") or "/xfer/" in filename.replace("\\", "/"):
        return f"warning: {message}\n"
    return _PYTHON_FORMAT(message, category, filename, lineno, line)


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = _format_warning
    # Under torchrun, a rank that fails early (its data check) makes torchrun SIGTERM the others, and one
    # of them may still be loading plugins (seconds, importing torch): `cmd_run`'s handler was not set
    # yet, so it died without a word (exit -15) instead of naming that rank. From the first line, then;
    # a SIGTERM while `_main` reports another error (outside its `try`) is caught here too.
    if not os.environ.get("TORCHELASTIC_RUN_ID"):
        return _main(argv)
    try:
        with _sigterm_stops_like_ctrl_c():
            return _main(argv)
    except Terminated:
        return _terminated(None)


def _main(argv: list[str] | None) -> int:
    try:
        host = default_host()
        parser = build_parser(host, argv)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    args = _parse(parser, argv)
    try:
        if getattr(args, "_plugin_run", None):
            return _run_plugin_command(args)
        return COMMANDS[args.command](args, host)
    except RecipeError as exc:
        count = len(exc.diagnostics)
        print(f"{exc}\n{count} problem{'s' if count != 1 else ''} found", file=sys.stderr)
        _note_run_failure(args, f"{exc.diagnostics[0] if exc.diagnostics else exc}")
        return exc.exit_code
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _note_run_failure(args, str(exc))
        return exc.exit_code
    except BrokenPipeError:  # `xfer ... | head`
        if args.command == "run":
            return _run_lost_its_output(args)
        sys.stderr.close()
        return 0
    except OSError as exc:
        if exc.errno not in _MACHINE_ERRNOS:
            _note_run_failure(args, f"{type(exc).__name__}: {exc}")
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror}; fix that and {_rerun(args)}{_kept(args)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if args.command == "run" and _lost_a_peer(exc):
            return _peer_failed(exc)
        number = _reported_errno(exc)  # safetensors' SafetensorError, raised by a stage's export
        if number not in _MACHINE_ERRNOS:
            _note_run_failure(args, f"{type(exc).__name__}: {exc}")
            raise
        print(f"error: {os.strerror(number)} ({exc}); fix that and {_rerun(args)}{_kept(args)}", file=sys.stderr)
        return 1
    except Terminated:
        return _terminated(args)
    except KeyboardInterrupt:
        # only a run resumes: `xfer validate --data` or `xfer vocab train` stopped by Ctrl-C start over
        print(f"interrupted; {_rerun(args)} to resume" if args.command == "run" else "interrupted", file=sys.stderr)
        return 130


def _rerun(args: argparse.Namespace) -> str:
    """How to go on after `xfer run` stopped: "re-run the same command", except after a `--fork NEW`
    that got as far as creating NEW. The same command is then refused ("--fork target NEW already
    exists"), so the advice printed on Ctrl-C, SIGTERM or a full disk led nowhere: the fork resumes as
    `--run-dir NEW`, and a copy cut short (no recipe.resolved.yaml yet) is deleted first. A fork target
    that held anything before this command (`_fork_was_free`) is the user's, never called a copy."""
    fork: Path | None = getattr(args, "fork", None)
    if args.command != "run" or fork is None or not getattr(args, "_fork_was_free", False):
        return "re-run the same command"
    if (fork / "recipe.resolved.yaml").is_file():
        return f"re-run it with --run-dir {fork} in place of --fork {fork} (the fork exists now)"
    if _holds_more_than_a_lock(fork):
        return f"delete {fork} (a copy of the run directory cut short) and re-run the same command"
    return "re-run the same command"


def _holds_more_than_a_lock(folder: Path) -> bool:
    """An existing folder with anything in it besides a run lock file (as the runner judges a fork target)."""
    from xfer.core.runs import runlock

    with contextlib.suppress(OSError):
        return folder.is_dir() and any(p.name != runlock.LOCK_FILE for p in folder.iterdir())
    return True  # unreadable: not ours to call a copy


def _kept(args: argparse.Namespace) -> str:
    """What survives a machine error, said only for `xfer run`: `xfer compare > /dev/full` or a
    `new-plugin` on a full disk were told that "completed stages and the last checkpoint are
    kept", which sent users looking for a run that does not exist."""
    return " (completed stages and the last checkpoint are kept)" if args.command == "run" else ""


def _note_run_failure(args: argparse.Namespace, error: str) -> None:
    """Under torchrun, leave this rank's error of `xfer run` for the other ranks (`_terminated`)."""
    if args.command == "run":
        from xfer.core import distributed as dist

        dist.note_failure(error)


def _lost_a_peer(exc: BaseException) -> bool:
    from xfer.core import distributed as dist

    return dist.lost_a_peer(exc)


def _peer_failed(exc: BaseException) -> int:
    """Outside a stage, a collective of `xfer run` lost its peer (gloo's "Connection closed by peer"):
    another rank ended. Its error, when it left one (`distributed.note_failure`), or that it vanished,
    instead of gloo's traceback, which named neither."""
    from xfer.core import distributed as dist

    peer = dist.failed_peer()
    if peer is not None:
        print(f"error: rank {peer[0]} failed: {peer[1]}; fix that and re-run the same command", file=sys.stderr)
    else:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"error: {dist.PeerLost(first)}", file=sys.stderr)
    return 1


def _terminated(args: argparse.Namespace | None) -> int:
    """SIGTERM stopped `xfer run`. Under torchrun it is most often torchrun stopping this rank because
    another one failed outside a stage (its data check, say, before it joined): "re-run to resume" was
    then wrong, nothing would resume until that rank's error is fixed. That rank left its error
    (`distributed.note_failure`) before it exited, so before this SIGTERM: it is named, exit 1.
    `args` is None for a SIGTERM under torchrun before the command line was parsed (`main`)."""
    from xfer.core import distributed as dist

    peer = dist.failed_peer() if args is None or args.command == "run" else None
    if peer is not None:
        print(
            f"error: rank {peer[0]} failed: {peer[1]} (torchrun then stopped this rank); fix that and re-run "
            "the same command",
            file=sys.stderr,
        )
        return 1
    print(
        "terminated (SIGTERM)" if args is None else f"terminated (SIGTERM); {_rerun(args)} to resume", file=sys.stderr
    )
    return 143


def _run_lost_its_output(args: argparse.Namespace) -> int:
    """`xfer run ... | head` (or a pager quit early): the next line the run printed raised
    BrokenPipeError, which stopped it between or inside stages. That is no success: exit 141 (what
    SIGPIPE gives any Unix writer) and say so on stderr if it is still open, instead of exit 0 for
    a run that stopped, as a listing cut short by `head` gets."""
    with contextlib.suppress(OSError):  # stderr may be the same closed pipe (`2>&1 | head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush into the closed pipe at exit
    with contextlib.suppress(OSError, ValueError):
        print(
            "error: the run's output pipe was closed (`| head`?): the run stopped there; "
            f"{_rerun(args)} to resume (completed stages and the last checkpoint are kept)",
            file=sys.stderr,
            flush=True,
        )
    return 141


def _run_plugin_command(args: argparse.Namespace) -> int:
    command = args._plugin_command
    try:
        run = import_object(args._plugin_run)
    except Exception as exc:
        raise PluginError(
            f"command {command.name!r} from plugin {command.provider!r} is broken: "
            f"{type(exc).__name__}: {exc} (in {command.run})"
        ) from None
    return int(run(args) or 0)


# --- commands -------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, host: PluginHost) -> int:
    from xfer.core import distributed as dist
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import check_data
    from xfer.core.runs.runner import check_run_dir, default_run_dir, run_recipe

    # whether a --fork target is this command's to call a copy after a stop (`_rerun`), not the user's
    args._fork_was_free = args.fork is None or not _holds_more_than_a_lock(args.fork)
    # SIGTERM stops like Ctrl-C from the start, not only once the stages run: a large data set's check
    # takes minutes, and torchrun stops this rank with SIGTERM when another one failed meanwhile (its
    # own check, say). Without the handler then, the process died without a word (exit -15), and
    # under torchrun without naming the rank that failed (`_terminated`).
    with _sigterm_stops_like_ctrl_c():
        _one_recipe(args)
        recipe = load_recipe(args.recipe, args.overrides, host)
        only = None if args.only is None else recipe.needed_for(s.strip() for s in args.only.split(",") if s.strip())
        # a device this machine lacks (`--device cuda` on a CPU machine, a typo) was refused by the runner,
        # after the data check, which reads every data file first: minutes on a large data set
        dist.select_device(args.device)
        # a run directory in use, of another recipe, or a fork target taken: refused before the data
        # check, not after it had read every data file (`run_recipe` checks again under the lock).
        # Not under torchrun: there `run_recipe` refuses on every rank at once, after they have met;
        # a rank refusing alone here was stopped by torchrun, maybe before it could say why
        if os.environ.get("WORLD_SIZE", "1").strip() in ("", "1"):
            check_run_dir(recipe, args.run_dir, force=args.force, fork=args.fork)
        # every selected stage's data read before the first stage trains; a stage's own check may find in
        # its folder what it already read (a fork reads the source run's: its copy is not made yet)
        check_data(recipe, host, only, run_dir=args.run_dir or default_run_dir(recipe))
        result = run_recipe(
            recipe, args.run_dir, force=args.force, fork=args.fork, device=args.device, host=host, only=only
        )
    if dist.is_main():
        from xfer.core.results import results_table

        try:
            table = results_table([result.run_dir / stage.name for stage in result.stages])
        except UserError as exc:
            # the run itself completed: a results.json the table cannot read (a plugin's own layout) is
            # said, and the run directory and reports still printed; it exited 2 without them
            print(f"warning: the results table could not be made: {exc}", file=sys.stderr)
            table = None
        if table:
            print(f"\nResults (dev; every score in percent):\n{table}\n")
        print(f"run directory: {result.run_dir.resolve()}")
        for stage in result.stages:
            if stage.report:
                print(f"report ({stage.name}): {stage.report.resolve()}")
    return 0


def cmd_results(args: argparse.Namespace, host: PluginHost) -> int:
    from xfer.core.results import missing_results, results_table, stage_groups

    table = results_table(args.paths)
    if table is None:
        print(
            f"no results yet under {', '.join(map(str, args.paths))} (no finished stage wrote outputs/results/results.json)"
        )
        # which stage failed or was killed: "no results yet" alone read as a run still to be started
        for note in missing_results(group[0] for group in stage_groups(args.paths) if len(group) == 1):
            print(note)
        return 1
    print(table)
    return 0


RECIPE_SUFFIXES = (".yaml", ".yml")


def _more_recipes(overrides: list[str]) -> tuple[list[Path], list[str]]:
    """(the further recipes among `xfer validate`'s words, its real overrides). `xfer validate
    recipes/*.yaml` took every recipe after the first for an override: "an override must look like
    'path.to.key=value'" once per file, and none of them validated. A word without `=` that names a
    YAML file cannot be an override, so it is a recipe; the `key=value` overrides apply to each."""
    recipes = [Path(o) for o in overrides if "=" not in o and o.lower().endswith(RECIPE_SUFFIXES)]
    return recipes, [o for o in overrides if "=" in o or not o.lower().endswith(RECIPE_SUFFIXES)]


def _one_recipe(args: argparse.Namespace) -> None:
    """`xfer run a.yaml b.yaml` (or `show`) was told "an override must look like 'path.to.key=value'" of
    b.yaml: the second recipe is named as such, with the command that takes several."""
    more, _ = _more_recipes(args.overrides)
    if more:
        raise UserError(
            f"xfer {args.command} takes one recipe, not also {', '.join(map(str, more))}: give them one at a time "
            "(`xfer validate` takes several)"
        )


def cmd_validate(args: argparse.Namespace, host: PluginHost) -> int:
    """Validate each recipe named, all of them even after a failure (for a CI over `recipes/*.yaml`);
    the exit code is the worst one."""
    more, overrides = _more_recipes(args.overrides)
    if not more:
        return _validate_one(args.recipe, overrides, args.data, host)
    worst = 0
    for path in [args.recipe, *more]:
        try:
            code = _validate_one(path, overrides, args.data, host)
        except RecipeError as exc:
            count = len(exc.diagnostics)
            print(f"{exc}\n{count} problem{'s' if count != 1 else ''} found in {path}", file=sys.stderr)
            code = exc.exit_code
        except UserError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            code = exc.exit_code
        worst = max(worst, code)
    return worst


def _validate_one(path: Path, overrides: list[str], data: bool, host: PluginHost) -> int:
    from xfer.core.recipes.recipe import load_recipe

    recipe = load_recipe(path, overrides, host)
    if data:
        from xfer.core.runs.preflight import check_data

        check_data(recipe, host)
    order = " -> ".join(recipe.stages)
    print(f"{path}: ok ({len(recipe.stages)} stage{'s' if len(recipe.stages) != 1 else ''}: {order})")
    return 0


def cmd_show(args: argparse.Namespace, host: PluginHost) -> int:
    from xfer.core.recipes.recipe import load_recipe

    _one_recipe(args)
    recipe = load_recipe(args.recipe, args.overrides, host)
    print(f"# resolved recipe {args.recipe}; comments say where each value came from")
    _print_annotated(recipe.resolved(), recipe.provenance, [], 0)
    return 0


def _print_annotated(
    value: Any, provenance: dict[str, str], path: list[str], indent: int, bullet: bool = False
) -> None:
    """`value` (a mapping) as YAML with each value's origin in a comment; `bullet`: it is a list item
    (its first key gets the `- `)."""
    pad = "  " * indent
    for i, (key, child) in enumerate(value.items()):
        lead = pad[:-2] + "- " if bullet and i == 0 else pad
        key_path = [*path, str(key)]
        origin = provenance.get(".".join(key_path)) or _closest_origin(provenance, key_path)
        comment = f"  # {origin}" if origin else ""
        if isinstance(child, dict) and child:
            print(f"{lead}{key}:{comment}")
            _print_annotated(child, provenance, key_path, indent + 1)
        elif isinstance(child, list) and child and _mixed_origins(provenance, key_path, origin):
            # e.g. one item of a file's flow list set by an override: each item says where it came from
            print(f"{lead}{key}:{comment}")
            for j, item in enumerate(child):
                item_path = [*key_path, str(j)]
                if isinstance(item, dict) and item:
                    _print_annotated(item, provenance, item_path, indent + 2, bullet=True)
                else:
                    item_origin = provenance.get(".".join(item_path)) or _closest_origin(provenance, item_path)
                    print(f"{pad}  - {_flow(item)}{f'  # {item_origin}' if item_origin else ''}")
        else:
            print(f"{lead}{key}: {_flow(child)}{comment}")


def _flow(value: Any) -> str:
    import yaml

    # allow_unicode: a recipe name "ü" was shown as "\\xFC"
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _source(origin: str) -> str | None:
    """The file or override an origin names (None for defaults: not a place a value was written)."""
    if origin.startswith("override "):
        return origin
    return origin.rsplit(":", 2)[0] if origin.count(":") >= 2 else None


def _mixed_origins(provenance: dict[str, str], key_path: list[str], origin: str) -> bool:
    """True if a value inside the list at `key_path` was written elsewhere than the list itself."""
    prefix, own = ".".join(key_path) + ".", _source(origin)
    return any(
        key.startswith(prefix) and (source := _source(value)) is not None and source != own
        for key, value in provenance.items()
    )


def _closest_origin(provenance: dict[str, str], key_path: list[str]) -> str:
    """Values without their own entry (e.g. task configs) inherit their parent's origin."""
    for cut in range(len(key_path) - 1, 0, -1):
        origin = provenance.get(".".join(key_path[:cut]))
        if origin:
            return "default" if origin == "default" else f"within {origin}"
    return ""


def _finite_or_null(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (JSON null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


def cmd_status(args: argparse.Namespace, host: PluginHost) -> int:
    from xfer.core.results import stage_problem
    from xfer.core.runs.runner import read_status

    # What cannot be a run directory is refused with the reason: a typo'd path is missing (not "a run
    # directory without a recipe"); a stage folder is answered with the run directory that holds it.
    run_dir: Path = args.run_dir
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a directory; give a run directory")
    if not (run_dir / "recipe.resolved.yaml").exists() and (run_dir / "stage.json").is_file():
        raise UserError(f"{run_dir}: a stage folder, not a run directory; try `xfer status {run_dir.parent}`")
    rows = read_status(run_dir, host)
    if args.json:
        # strict JSON: a damaged stage.json's NaN start time gave a bare NaN duration, which JSON tools reject
        print(json.dumps(_finite_or_null(rows), indent=1, allow_nan=False))
        return 0
    # columns as wide as their longest entry (stage names like `cvt-10-trained-unk`, `invalidated`)
    w_stage = max([len("stage")] + [len(r["stage"]) for r in rows])
    w_kind = max([len("kind")] + [len(r["kind"] or "?") for r in rows])
    w_status = max([len("status")] + [len(r["status"]) for r in rows])
    print(
        f"{'stage':<{w_stage}} {'kind':<{w_kind}} {'status':<{w_status}} {'fingerprint':<13} {'duration':>9} "
        f"{'attempts':>8}  checkpoint"
    )
    indent = " " * w_stage
    for r in rows:
        duration = f"{r['duration_s']}s" if r["duration_s"] is not None else "-"
        print(
            f"{r['stage']:<{w_stage}} {r['kind'] or '?':<{w_kind}} {r['status']:<{w_status}} "
            f"{r['fingerprint'] or '-':<13} {duration:>9} {r['attempts'] or '-':>8}  {r['checkpoint'] or '-'}"
        )
        for trial in r.get("trial_checkpoints", []):
            print(f"{indent} checkpoint: {trial['run']}: {trial['checkpoint'] or '-'}")
        if r["error"]:
            print(f"{indent} error: {r['error']}")
        if r["status"] == "damaged" and not r["reruns_because"]:
            # the reason is otherwise only among the reasons to run again, which a recipe that no
            # longer validates leaves unknown: "damaged" alone named neither the file nor the fault
            problem = stage_problem(run_dir / r["stage"])
            if problem is not None:
                print(f"{indent} damaged: {problem[1]}")
        for reason in r["reruns_because"]:
            print(f"{indent} runs again because {reason}")
        for note in r.get("notes", []):
            print(f"{indent} note: {note}")
    unknown = next((r["staleness_unknown"] for r in rows if r.get("staleness_unknown")), None)
    if unknown:
        print(f"note: {unknown}", file=sys.stderr)
    return 0


SLOW_IMPORT_SECONDS = 1.0
"""`xfer plugins` flags a plugin whose import took longer: every command pays for it."""


def cmd_plugins(args: argparse.Namespace, host: PluginHost) -> int:
    check = getattr(args, "check", False)
    if check:
        host.check_components()
    records = list(host.plugins.values())
    # `--check` is for CI: a failed plugin, a broken component or a conflict is a non-zero exit
    found_problems = any(r.error or r.problems for r in records) or bool(host.conflicts or host.namespace_conflicts)
    status = 1 if check and found_problems else 0
    if args.json:
        data = [
            {
                "name": r.name,
                "distribution": r.distribution,
                "version": r.version,
                "module": r.module,
                "hooks": r.hooks,
                "components": [
                    {
                        "kind": c.kind,
                        "name": c.name,
                        "version": c.version,
                        "summary": c.summary,
                        "error": r.problems.get(c.name),
                        "notes": r.notes.get(c.name, []),
                        "registered_twice": (c.kind, c.name) in host.conflicts,
                    }
                    for c in r.components
                ],
                "error": r.error,
                "namespace_claimed_by": host.namespace_conflicts.get(r.name, []),
                "import_seconds": round(r.import_seconds, 3),
            }
            for r in records
        ]
        print(json.dumps(data, indent=1))
        return status
    for r in records:
        slow = (
            f"  SLOW: import took {r.import_seconds:.1f} s (every xfer command pays it; keep the plugin module cheap)"
            if r.import_seconds > SLOW_IMPORT_SECONDS
            else ""
        )
        print(f"{r.name}  ({r.distribution} {r.version}, {r.module})")
        if slow:
            print(slow)
        if r.error:
            print(f"  FAILED: {r.error}")
            if not r.components:
                continue
        print(f"  hooks: {', '.join(r.hooks) or '-'}")
        for c in r.components:
            twice = "  (registered twice)" if (c.kind, c.name) in host.conflicts else ""
            print(f"  {c.kind:<9} {c.name:<28} v{c.version}  {c.summary}{twice}")
            if c.name in r.problems:
                print(f"    BROKEN: {r.problems[c.name]}")
            for note in r.notes.get(c.name, []) if check else []:
                print(f"    note: {note}")
    for kind, name in host.conflicts:
        try:
            host.get(kind, name)
        except PluginError as exc:  # names the two plugins (modules by their path) and what to do
            print(f"CONFLICT: {exc}")
    for namespace, claims in host.namespace_conflicts.items():
        print(
            f"CONFLICT: namespace {namespace!r} claimed by {' and '.join(claims)}: none of its components can be "
            f"used; {host.conflict_fix(namespace)}"
        )
    if status:
        print("xfer plugins --check: problems found (FAILED, BROKEN or CONFLICT above)", file=sys.stderr)
    return status


def cmd_components(args: argparse.Namespace, host: PluginHost) -> int:
    specs = sorted(host.components.values(), key=lambda s: (s.kind, s.name))
    specs = [s for s in specs if args.kind in (None, s.kind)]
    if args.json:
        print(
            json.dumps(
                [
                    {"kind": s.kind, "name": s.name, "version": s.version, "summary": s.summary, "provider": s.provider}
                    for s in specs
                ],
                indent=1,
            )
        )
        return 0
    for s in specs:
        twice = "  (CONFLICT: registered twice; see xfer plugins)" if (s.kind, s.name) in host.conflicts else ""
        print(f"{s.kind:<9} {s.name:<28} {s.summary}{twice}")
    return 0


def cmd_explain(args: argparse.Namespace, host: PluginHost) -> int:
    try:
        spec = host.get(args.kind, args.name)
    except PluginError as exc:
        # `xfer explain task transformer.finetune` said "plugin 'transformer' provides: no tasks", and
        # `explain stage glue/rte` "no stages", without a word that the name is a component of another kind
        other = next((kind for kind in KINDS if kind != args.kind and (kind, args.name) in host.components), None)
        if other is None:
            raise
        raise PluginError(f"{exc}; {args.name} is a {other}: xfer explain {other} {args.name}") from None
    print(f"{spec.kind} {spec.name}  (version {spec.version}, from {spec.provider})")
    if spec.summary:
        print(f"  {spec.summary}")
    target_doc = None
    try:
        target_doc = inspect.cleandoc(spec.load().__doc__ or "")
    except Exception as exc:  # documentation must not need every heavy import to work
        print(f"  (could not import {spec.target}: {type(exc).__name__}: {exc})")
    except SystemExit as exc:  # a plugin module that exits at import must not end `xfer explain` silently
        print(f"  (could not import {spec.target}: it called sys.exit({exc.code!r}))")
    if target_doc:
        print("\n" + "\n".join("  " + line for line in target_doc.splitlines()))
    if spec.outputs:
        kinds = dict(spec.output_kinds)
        listed = ", ".join(f"{o} ({kinds[o]})" if o in kinds else o for o in spec.outputs)
        print(f"\noutputs: {listed}  (reference them as <stage>.<output>)")
    cls = host.config_class(spec.kind, spec.name, target=False)  # a broken target is shown above
    if cls is None:
        print("\nconfig: none")
        return 0
    print("\nconfig:")
    for line in describe_fields(cls):
        print("  " + line)
    for note in host.config_notes(spec.kind, spec.name):
        print(f"  note: {note}")
    return 0


def describe_fields(cls: type, prefix: str = "", defaults: Any = None) -> list[str]:
    """`name: type = default  # doc` lines for every field; nested config dataclasses are
    flattened (`train.lr`) with the defaults the enclosing config gives them."""
    from xfer.core.config import TAKES, UNSIGNED_AT, ComponentRef, Files, Input
    from xfer.core.recipes.schema import to_plain, type_name

    hints = typing.get_type_hints(cls, include_extras=True)
    lines = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        doc = f.metadata.get("doc", "")
        if defaults is not None:
            default_value: Any = getattr(defaults, f.name)
        elif f.default is not dataclasses.MISSING:
            default_value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default_value = f.default_factory()
        else:
            default_value = dataclasses.MISSING
        special = isinstance(tp, type) and issubclass(tp, (ComponentRef, Input, Files))
        if dataclasses.is_dataclass(tp) and not special:
            lines.append(f"{prefix}{f.name}:" + (f"  # {doc}" if doc else ""))
            nested = default_value if dataclasses.is_dataclass(default_value) else None
            lines += describe_fields(tp, prefix + f.name + ".", nested)
            continue
        shown = (
            "(required)"
            if default_value is dataclasses.MISSING or f.metadata.get("required")
            else json.dumps(to_plain(default_value), default=str)
        )
        if f.metadata.get(TAKES):  # stage references of other kinds are refused (docs/plugins.md)
            doc = f"{doc} (a stage output must be: {' or '.join(f.metadata[TAKES])})".strip()
        if UNSIGNED_AT in f.metadata:  # fingerprints leave the knob out at this value (docs/plugins.md)
            unsigned = json.dumps(to_plain(f.metadata[UNSIGNED_AT]), default=str)
            doc = f"{doc} (unsigned at {unsigned}: runs made before this knob existed stay fresh)".strip()
        lines.append(f"{prefix}{f.name}: {type_name(tp)} = {shown}" + (f"  # {doc}" if doc else ""))
    return lines


def cmd_new_plugin(args: argparse.Namespace, host: PluginHost) -> int:
    from xfer.core.scaffold import scaffold_plugin

    target = scaffold_plugin(args.name, args.dir, taken={record.name for record in host.plugins.values()})
    print(f"created {target}; install it with: pip install -e {target}")
    return 0


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "show": cmd_show,
    "status": cmd_status,
    "results": cmd_results,
    "plugins": cmd_plugins,
    "components": cmd_components,
    "explain": cmd_explain,
    "new-plugin": cmd_new_plugin,
}


if __name__ == "__main__":  # `torchrun --nproc_per_node=2 -m xfer.core.cli run RECIPE`
    sys.exit(main())
