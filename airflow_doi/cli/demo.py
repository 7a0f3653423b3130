"""``airflow-doi demo``: the project's main job on the bundled sample data.

The demo is a list of steps run in order; each step is a small function that takes the demo
context and prints what it produced. Today there is one step (normalize the messy sample CSV);
later steps (resolve, load, the Airflow pipeline) append themselves to :data:`STEPS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The sample shipped with the repository: a few hundred DOI cells in every messy form.
SAMPLE = Path("examples/data/messy_dois.csv")
SAMPLE_COLUMN = "doi_raw"


@dataclass(frozen=True)
class DemoContext:
    """Where the demo reads and writes; shared by every step."""

    root: Path
    out: Path

    @property
    def sample(self) -> Path:
        return self.root / SAMPLE


def normalize_sample(context: DemoContext) -> None:
    """Normalize the sample CSV into ``out/messy_dois.normalized.csv``."""
    from airflow_doi.cli.normalize import normalize_file

    target = context.out / "messy_dois.normalized.csv"
    summary, skipped, _ = normalize_file(context.sample, target, column=SAMPLE_COLUMN)
    print(f"normalize: wrote {target}")
    print(f"normalize: {summary.line()}")
    if skipped:
        print(f"normalize: {skipped} malformed CSV rows skipped")


Step = Callable[[DemoContext], None]
#: The demo, in order; later issues add their steps here.
STEPS: list[tuple[str, Step]] = [("normalize", normalize_sample)]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the project's main job on the bundled sample data", description=__doc__
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="repository checkout (default: cwd)"
    )
    parser.add_argument("--out", type=Path, default=None, help="output folder (default ROOT/out)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    context = DemoContext(root=args.root, out=args.out or args.root / "out")
    if not context.sample.is_file():
        print(
            f"airflow-doi demo: error: sample {context.sample} not found; "
            "run the demo from the repository checkout or pass --root",
            file=sys.stderr,
        )
        return 2
    for name, step in STEPS:
        print(f"== {name}")
        step(context)
    return 0
