"""The Kafka error-code table (kwire_cli.spec.error_codes)."""
import pytest

from kwire_cli.spec.error_codes import ERRORS, error_code, error_name, is_retriable


def test_table_is_contiguous_and_names_unique():
    assert sorted(ERRORS) == list(range(-1, 134))
    names = [i.name for i in ERRORS.values()]
    assert len(set(names)) == len(names)
    assert all(n == n.upper() and " " not in n for n in names)


@pytest.mark.parametrize("code,name,retriable", [
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (0, "NONE", False),
    (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True),
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (35, "UNSUPPORTED_VERSION", False),
    (51, "CONCURRENT_TRANSACTIONS", True),
    (90, "PRODUCER_FENCED", False),
    (129, "REBOOTSTRAP_REQUIRED", False),
    (133, "SHARE_SESSION_LIMIT_REACHED", True),
])
def test_known_codes(code, name, retriable):
    assert error_name(code) == name
    assert error_code(name) == code
    assert error_code(name.lower()) == code
    assert is_retriable(code) is retriable


def test_unknown_codes_and_names():
    assert error_name(134) == "UNKNOWN_ERROR_CODE_134"
    assert error_name(-2) == "UNKNOWN_ERROR_CODE_-2"
    assert is_retriable(999) is False
    with pytest.raises(KeyError, match="NO_SUCH_ERROR"):
        error_code("NO_SUCH_ERROR")
