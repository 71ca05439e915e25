"""``spark-submit`` entry point: ``spark-submit [options] kwire_cli/cli/spark_submit.py DIR... --out DIR``.

spark-submit runs a Python *file*; this one runs ``kwire spark-decode`` with the arguments given
after it, in the SparkSession spark-submit configured (master, executors, memory...). Find the file
with ``python -m kwire_cli.cli.spark_submit --path``.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--path"]:  # `python -m kwire_cli.cli.spark_submit --path`: this file, for spark-submit
        print(__file__)
        return
    from kwire_cli.cli import main as kwire_main
    kwire_main(["spark-decode", *args])


if __name__ == "__main__":
    main()
