"""The authentication part of the summary: SASL exchanges per connection, counted from output rows.

``AuthSummary.add`` keeps, per connection (client endpoint, broker endpoint), the SaslHandshake and
SaslAuthenticate rows' few facts with their positions; ``merge`` adds another part's (exact in any
order: facts are replayed in position order by ``to_dict``); ``to_dict`` replays each connection's
facts into authentication attempts and gives the summary's ``auth`` section (None when the capture
has no SASL exchange):

* ``authentications``, ``succeeded``, ``failed``, ``incomplete`` (the capture ends or the
  connection moves on before an answer says), ``reauthentications`` (KIP-368: an attempt on a
  connection that had already authenticated), ``mechanisms`` (attempts per mechanism);
* ``principals``: per principal (the authorization id, else the user, else a bearer token's
  ``sub`` claim; ``(unknown)`` when the client's messages name none) its mechanisms and counts;
* ``connections``: per connection its mechanism, principal and the last attempt's result;
* ``failures``: each failed attempt with the error code's name and the broker's message.

An attempt starts at a SaslHandshake request (or at a SaslAuthenticate with none before it); it
fails on a non-zero ErrorCode in a SaslHandshake or SaslAuthenticate answer, succeeds on an answer
with ErrorCode 0 that is not a SCRAM server-first or an OAUTHBEARER error (which ask the client for
more). Rows carry the decoded ``Sasl`` (``kwire_cli.codec.secrets``): nothing secret is kept.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.codec.sasl import principal as sasl_principal
from kwire_cli.spec.error_codes import error_name

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_TOKEN = "sasl-token"  # (capture.stream's kind for KIP-43 raw tokens; auth is read by rows only)
MAX_FACTS = 10_000          # per connection (the first by position are kept)
MAX_CONNECTIONS_LISTED = 1000
MAX_FAILURES_LISTED = 200
PENDING = frozenset({"server-first", "server-error"})  # answers that ask the client for more
UNKNOWN = "(unknown)"


class AuthSummary:
    """SASL facts per connection; see the module doc."""

    def __init__(self) -> None:
        self.facts: dict[tuple[str, str], list[tuple[Any, ...]]] = {}

    def add(self, r: dict[str, Any], pos: Any) -> None:
        """Note one row (any row: only SaslHandshake and SaslAuthenticate rows that decoded count)."""
        key = r["api_key"]
        if key != SASL_AUTHENTICATE and key != SASL_HANDSHAKE and r["kind"] != SASL_TOKEN:
            return
        body = r.get("body")
        if body is None or r.get("error") is not None:
            return
        fact: tuple[Any, ...]
        if r["kind"] == SASL_TOKEN:  # KIP-43 raw tokens: a client's is an authenticate, a broker's its answer
            sasl = body.get("Sasl") or {}
            if body.get("Side") == "client":
                conn = (r["src"], r["dst"])
                fact = (pos, "A", sasl_principal(sasl), sasl.get("Mechanism"))
            else:
                conn = (r["dst"], r["src"])
                fact = (pos, "a", 0, None, sasl.get("Message"), sasl.get("Error"), None)
        elif r["kind"] == "request":
            conn = (r["src"], r["dst"])
            if key == SASL_HANDSHAKE:
                fact = (pos, "H", body.get("Mechanism"))
            else:
                sasl = body.get("Sasl") or {}
                fact = (pos, "A", sasl_principal(sasl), sasl.get("Mechanism"))
        else:
            conn = (r["dst"], r["src"])
            code = body.get("ErrorCode")
            if key == SASL_HANDSHAKE:
                fact = (pos, "h", code)
            else:
                sasl = body.get("Sasl") or {}
                fact = (pos, "a", code, body.get("ErrorMessage"), sasl.get("Message"), sasl.get("Error"),
                        body.get("SessionLifetimeMs"))
        facts = self.facts.get(conn)
        if facts is None:
            facts = self.facts[conn] = []
        if len(facts) < MAX_FACTS:
            facts.append(fact)

    def merge(self, o: AuthSummary) -> AuthSummary:
        """Add another part's facts (positions of both comparable)."""
        for conn, facts in o.facts.items():
            mine = self.facts.get(conn)
            if mine is None:
                self.facts[conn] = list(facts)
            else:
                mine.extend(facts)
                if len(mine) > MAX_FACTS:
                    mine.sort(key=_pos)
                    del mine[MAX_FACTS:]
        return self

    def to_dict(self) -> dict[str, Any] | None:
        if not self.facts:
            return None
        totals = {"authentications": 0, "succeeded": 0, "failed": 0, "incomplete": 0, "reauthentications": 0}
        mechanisms: dict[str, int] = {}
        principals: dict[str, dict[str, Any]] = {}
        conns = []
        failures = []
        ordered = sorted(self.facts.items(), key=lambda kv: _pos(min(kv[1], key=_pos)))
        for (client, broker), facts in ordered:
            attempts = _attempts(sorted(facts, key=_pos))
            if not attempts:
                continue
            for a in attempts:
                totals["authentications"] += 1
                totals[{"ok": "succeeded", "failed": "failed"}.get(a["result"], "incomplete")] += 1
                totals["reauthentications"] += a["reauthentication"]
                mech = a["mechanism"] or UNKNOWN
                mechanisms[mech] = mechanisms.get(mech, 0) + 1
                p = principals.setdefault(a["principal"] or UNKNOWN,
                                          {"mechanisms": [], "succeeded": 0, "failed": 0, "incomplete": 0})
                if mech not in p["mechanisms"]:
                    p["mechanisms"].append(mech)
                p[{"ok": "succeeded", "failed": "failed"}.get(a["result"], "incomplete")] += 1
                if a["result"] == "failed":
                    failures.append({"client": client, "broker": broker, "mechanism": a["mechanism"],
                                     "principal": a["principal"], "error": a["error"], "message": a["message"]})
            last = attempts[-1]
            conns.append({"client": client, "broker": broker, "mechanism": last["mechanism"],
                          "principal": last["principal"], "result": last["result"],
                          "authentications": len(attempts),
                          "failed": sum(a["result"] == "failed" for a in attempts),
                          "reauthentications": sum(a["reauthentication"] for a in attempts),
                          "session_lifetime_ms": last["session_lifetime_ms"]})
        if not conns:
            return None
        out: dict[str, Any] = dict(totals)
        out["connections"] = len(conns)
        out["mechanisms"] = dict(sorted(mechanisms.items()))
        out["principals"] = dict(sorted(principals.items()))
        out["by_connection"] = conns[:MAX_CONNECTIONS_LISTED]
        out["failures"] = failures[:MAX_FAILURES_LISTED]
        return out


def _pos(fact: tuple[Any, ...]) -> Any:
    return fact[0]


def _new(mechanism: Any, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    a = {"mechanism": mechanism, "principal": None, "result": None, "error": None, "message": None,
         "reauthentication": any(x["result"] == "ok" for x in attempts), "session_lifetime_ms": None}
    attempts.append(a)
    return a


def _attempts(facts: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Replay one connection's facts (in position order) into its authentication attempts."""
    attempts: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for f in facts:
        tag = f[1]
        if tag == "H":
            if cur is not None and cur["result"] is None:
                cur["result"] = "incomplete"
            cur = _new(f[2], attempts)
        elif tag == "h":
            if cur is None:
                cur = _new(None, attempts)
            if f[2]:
                cur["result"], cur["error"] = "failed", error_name(f[2])
        elif tag == "A":
            if cur is None or cur["result"] == "failed" or cur["result"] == "incomplete":
                cur = _new(f[3], attempts)
            elif cur["result"] == "ok":
                cur["result"] = None  # another round of the same exchange (GSSAPI)
            if f[2] is not None:
                cur["principal"] = f[2]
            if cur["mechanism"] is None:
                cur["mechanism"] = f[3]
        else:  # "a"
            if cur is None:
                cur = _new(None, attempts)
            _, _, code, message, sasl_message, sasl_error, lifetime = f
            if code:
                cur["result"], cur["error"], cur["message"] = "failed", error_name(code), message
            elif sasl_message in PENDING:
                cur["result"] = None
            elif sasl_error is not None and sasl_message == "server-final":
                cur["result"], cur["error"], cur["message"] = "failed", "SCRAM server-final error", sasl_error
            else:
                cur["result"] = "ok"
            if lifetime:
                cur["session_lifetime_ms"] = lifetime
    for a in attempts:
        if a["result"] is None:
            a["result"] = "incomplete"
    return attempts
