#!/bin/sh
# Every check of the project, in the order CI runs them (after `sh scripts/setup.sh --test`):
#   ruff (lint, config in pyproject.toml), mypy (strict on kwire_cli.spec, .codec, .records, .values,
#   .tls, .capture, .output and .analysis), lint-imports (the layers listed in pyproject.toml, imports
#   inside functions included), scripts/check_imports.py (no reach-ins to another package's private
#   names) and its --scope module run (none between the modules of one package either), then the tests.
# Each one runs even when an earlier one failed; the exit status is 1 if any failed.
#
#   sh scripts/check.sh                  # everything
#   sh scripts/check.sh --static         # the static checks only (a few seconds)
#   sh scripts/check.sh -m "not spark"   # the static checks, then pytest with these arguments
cd "$(dirname "$0")/.."
static_only=
if [ "${1:-}" = "--static" ]; then
  static_only=1
  shift
fi
failed=
run() {
  name=$1
  shift
  echo "== $name: $*"
  if "$@"; then
    echo "== $name: ok"
  else
    echo "== $name: FAILED" >&2
    failed="$failed $name"
  fi
}
run ruff python -m ruff check .
run mypy python -m mypy
run import-linter python -c "from importlinter.cli import lint_imports_command; lint_imports_command(prog_name='lint-imports')"
run private-names python scripts/check_imports.py
run private-names-module python scripts/check_imports.py --scope module
if [ -z "$static_only" ]; then
  # on 2 workers when pytest-xdist is installed (the test extra), unless the arguments choose (-n, -p no:xdist);
  # tests/conftest.py keeps the Spark tests and the timed ones on one worker
  case " $* " in
    *" -n"*|*" --numprocesses"*|*"no:xdist"*) parallel= ;;
    *) python -c "import xdist" 2>/dev/null && parallel=1 || parallel= ;;
  esac
  if [ -n "$parallel" ]; then
    run pytest python -m pytest -n 2 --dist loadgroup "$@"
  else
    run pytest python -m pytest "$@"
  fi
fi
if [ -n "$failed" ]; then
  echo "check: failed:$failed" >&2
  exit 1
fi
echo "check: all passed"
