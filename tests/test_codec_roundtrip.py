"""Every (API, version, kind): generated value -> encode -> decode -> equal, and the bytes
decode and re-encode to the same bytes (header included)."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire_cli.codec import compile_plan, decode_request, decode_response, encode_request, encode_response
from kwire_cli.spec import registry
from spec_strategies import TEXT, message_strategy


def _cases():
    for key, api in registry().apis.items():
        for kind in ("request", "response"):
            vv = api.spec(kind).valid_versions
            for v in range(vv.lo, vv.hi + 1):
                yield pytest.param(key, kind, v, id=f"{api.name}-v{v}-{kind}")


@pytest.mark.parametrize("key,kind,version", list(_cases()))
def test_round_trip(key, kind, version):
    api = registry().api(key)
    spec = api.spec(kind)
    plan = compile_plan(spec, version, "hex")

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(body=message_strategy(spec, version), corr=st.integers(-2**31, 2**31 - 1),
           client=st.one_of(st.none(), TEXT))
    def check(body, corr, client):
        out = bytearray()
        plan.encode(body, out)
        decoded, pos = plan.decode(bytes(out), 0, len(out))
        assert pos == len(out)
        assert decoded == body
        again = bytearray()
        plan.encode(decoded, again)
        assert again == out
        if kind == "request":
            frame = encode_request(key, version, {"CorrelationId": corr, "ClientId": client}, body)
            msg = decode_request(frame, records="hex")
            assert msg.header["CorrelationId"] == corr
            assert encode_request(key, version, msg.header, msg.body) == frame
        else:
            frame = encode_response(key, version, {"CorrelationId": corr}, body)
            msg = decode_response(frame, key, version, records="hex")
            assert encode_response(key, version, msg.header, msg.body) == frame
        assert msg.body == body

    check()
