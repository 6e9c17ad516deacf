"""Commands over a results folder: report, baseline, export, rank."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rackbench.cli.base import CHANGELOG, HISTORY, Command
from rackbench.core.report_folder import ReportFolder
from rackbench.core.results_folder import ResultsFolder


class ReportCommand(Command):
    name = "report"
    help = ("Pareto plots, offload A/B, report.md and points.csv of a results folder, and report.html over its "
            "history")
    options = (HISTORY, CHANGELOG)

    def add_arguments(self, parser) -> None:
        parser.add_argument("results", help="results folder (reads <results>/points/*.json)")
        parser.add_argument("--out", help="output folder (default: <results>/report)")

    def run(self, args) -> int:
        from rackbench.report import files
        rep = files.write(Path(args.results), Path(args.out) if args.out else None)
        for name, why in sorted(rep.rejected.items()):
            print(f"{ResultsFolder.at(args.results).points / name}: skipped: {why}", file=sys.stderr)
        html_error = None
        if rep.points:
            try:
                rep.files.append(self.html(args, ReportFolder(rep.files[0].parent).html))
            except ValueError as err:        # a --history that is not one: the other files are written already
                html_error = f"report.html not written: {err}"
        else:
            print(f"{ResultsFolder.at(args.results).points}: no valid result file in it", file=sys.stderr)
        print("\n".join(str(f) for f in rep.files))
        if html_error:
            print(html_error, file=sys.stderr)
            return 2
        return 0 if rep.points else 1

    @staticmethod
    def html(args, page: Path) -> Path:
        """report.html over the history (--history, else RESULTS/history.sqlite); without one, over this folder
        alone (in a throw-away store: the report adds nothing to any history)."""
        from rackbench.history import store
        from rackbench.report import html
        db = Path(args.history) if args.history else ResultsFolder.at(args.results).history
        if db.is_file() or args.history:
            return html.write(db, page, Path(args.changelog))
        with tempfile.TemporaryDirectory() as tmp:
            scratch = ResultsFolder.at(tmp).history
            store.add(scratch, args.results)
            return html.write(scratch, page, Path(args.changelog))


class BaselineCommand(Command):
    name = "baseline"
    help = "write a baseline (accepted tok/s per GPU per point) from a results folder"

    def add_arguments(self, parser) -> None:
        parser.add_argument("results")
        parser.add_argument("--out", required=True, help="e.g. baselines/<cluster>.json")
        parser.add_argument("--cluster", help="when the results hold several clusters (default: the one the --out "
                                                  "file is named after, e.g. baselines/local-cpu.json)")

    def run(self, args) -> int:
        from rackbench.results import baseline
        dropped: dict[str, str] = {}
        data = baseline.make(Path(args.results), args.cluster, dropped, hint=Path(args.out).stem)
        baseline.write(data, Path(args.out))
        for name, why in sorted(dropped.items()):
            print(f"{ResultsFolder.at(args.results).points / name}: dropped: {why}", file=sys.stderr)
        print(f"{args.out}: {len(data['points'])} point(s) of cluster {data['cluster']}"
              + (f", {len(dropped)} file(s) dropped (above)" if dropped else ""))
        return 0 if data["points"] else 1


class ExportCommand(Command):
    name = "export"
    help = "write a results folder's points in another tool's format (the seed system's agentic aggregate)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("results", help="results folder (reads <results>/points/*.json and each requests file)")
        parser.add_argument("--inferencex", required=True, metavar="DIR",
                            help="write each point as InferenceX's agentic aggregate JSON into DIR, and agg_<name>.json")
        parser.add_argument("--name", help="the experiment name of agg_<name>.json (default: the run id)")

    def run(self, args) -> int:
        from rackbench.report.inferencex import export
        try:
            written = export(Path(args.results), Path(args.inferencex), args.name)
        except ValueError as err:
            print(f"export: {err}", file=sys.stderr)
            return 1
        print("\n".join(str(f) for f in written))
        return 0


class RankCommand(Command):
    name = "rank"
    help = "rank deployments by what each serves per GPU within its SLO tier (their searches), or say why not"

    def add_arguments(self, parser) -> None:
        parser.add_argument("results", nargs="+", help="results folders holding the searches (searches/*.json)")
        from rackbench.recipe.schema.ranking import FACTORS
        parser.add_argument("--factor", choices=FACTORS, default=FACTORS[0],
                            help="what the arms may differ in (default: the deployment; image: the image too)")

    def run(self, args) -> int:
        from rackbench.report.rank import load, ranking, text
        missing = [r for r in args.results if not Path(r).is_dir()]
        if missing:
            print(f"rank: no results folder at {', '.join(missing)} (give the folders a benchmark session wrote)",
                  file=sys.stderr)
            return 2
        arms = load([Path(r) for r in args.results], args.factor)
        if len(arms) < 2:
            print(f"rank: {len(arms)} search(es) in {', '.join(args.results)}: a ranking needs two or more",
                  file=sys.stderr)
            return 1
        print("\n".join(text(arms, ranking(arms))))
        return 0


COMMANDS = (ReportCommand, BaselineCommand, ExportCommand, RankCommand)
