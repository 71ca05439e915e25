#!/bin/sh
# kwire spark-decode on a real Spark standalone cluster (one master, one worker, 127.0.0.1 only),
# started and stopped by tests/test_spark_cluster.py: the executors cannot import kwire from this
# checkout, so the rows come out right only if the job ships its code and specs to them.
# Needs Java 17 and the pyspark wheel (the cluster's master and worker come from it). ~40 s.
# The default test run (python -m pytest) includes it; KWIRE_SPARK_CLUSTER=0 leaves it out.
set -e
cd "$(dirname "$0")/.."
export SPARK_LOCAL_IP=127.0.0.1
exec python -m pytest tests/test_spark_cluster.py -q "$@"
