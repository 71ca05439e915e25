"""``spark-submit`` entry point: ``spark-submit [options] kwire_cli/spark/submit.py DIR... --out DIR``.

spark-submit runs a Python *file*; this one runs ``kwire spark-decode`` with the arguments given
after it, in the SparkSession spark-submit configured (master, executors, memory...). Find the file
with ``python -c "import kwire_cli.spark.submit as m; print(m.__file__)"``.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from kwire_cli.cli import main as kwire_main
    kwire_main(["spark-decode", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
