"""Consumer groups: generations, members, assignments and what caused each rebalance.

Facts are taken from paired requests and answers (``Groups.fact``) and kept per group id with their
positions; ``merge`` concatenates another part's facts; ``to_list`` replays each group's facts in
position order. Definitions (also in docs/cli.md):

* classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): a generation starts at the first
  JoinGroup request after the previous generation was formed (its first SyncGroup answer), and its
  rebalance lasts until the last successful SyncGroup answer of that generation. Its members are the
  leader's JoinGroup answer's member list (else the members whose JoinGroup answer gave that
  generation); each member's assignment is decoded from the SyncGroup assignment bytes (the
  consumer protocol), the member's own answer over the leader's request.
* KIP-848 groups (ConsumerGroupHeartbeat; ShareGroupHeartbeat and StreamsGroupHeartbeat alike):
  a generation is a member epoch the broker answered; it starts at the first answer giving that
  epoch and lasts until the last member reached it; assignments are the answers' own.
* the cause: members in the generation and not in the one before joined; members in the one before
  and not in this one left (a LeaveGroup, with its reason) or timed out (no LeaveGroup: gone silent,
  their later heartbeats answered UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_MEMBER_EPOCH).
"""
from __future__ import annotations

from typing import Any

from kwire_cli.analysis.names import error_code
from kwire_cli.capture.names import topic_name
from kwire_cli.spec.error_codes import error_name

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
EPOCH_HEARTBEATS = {68: "consumer", 76: "share", 88: "streams"}
MAX_FACTS = 100_000  # per group (the first by position are kept)
MAX_EVENTS = 1000
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27
GONE = {25, 22, 110}  # UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH


def _assignment(value: Any) -> dict[str, list[int]] | None:
    """{topic: [partitions]} of a decoded ConsumerProtocolAssignment."""
    if not isinstance(value, dict) or not isinstance(value.get("AssignedPartitions"), list):
        return None
    out: dict[str, list[int]] = {}
    for tp in value["AssignedPartitions"]:
        out.setdefault(str(tp.get("Topic")), []).extend(tp.get("Partitions") or [])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def _embedded(r: dict[str, Any]) -> dict[Any, Any]:
    """The row's embedded consumer protocol values by path."""
    return {e.get("path"): e.get("value") for e in r.get("embedded") or [] if isinstance(e, dict)}


def _epoch_assignment(a: Any, names: dict[str, Any] | None) -> dict[str, list[int]] | None:
    if not isinstance(a, dict) or not isinstance(a.get("TopicPartitions"), list):
        return None
    out: dict[str, list[int]] = {}
    for tp in a["TopicPartitions"]:
        out.setdefault(topic_name(tp, names), []).extend(tp.get("Partitions") or [])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


class Groups:
    """Group facts per group id (see the module doc)."""

    def __init__(self) -> None:
        self.facts: dict[str, list[tuple[Any, ...]]] = {}
        self.client_group: dict[Any, tuple[Any, str]] = {}  # client id -> (position, group id) last seen

    def note_client(self, cid: Any, group: Any, pos: Any) -> None:
        if isinstance(group, str) and group:
            g = self.client_group.get(cid)
            if g is None or pos >= g[0]:
                self.client_group[cid] = (pos, group)

    def request(self, r: dict[str, Any]) -> Any:
        """What to keep of a group request until its answer (None: nothing)."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        key = r["api_key"]
        cid = r.get("client_id")
        base = (body.get("GroupId"), cid, r["src"], r.get("ts"), r.get("file"), r.get("frame"))
        if key == JOIN:
            return base + ({"member": body.get("MemberId"), "reason": body.get("Reason"),
                            "protocol_type": body.get("ProtocolType")},)
        if key == SYNC:
            emb = _embedded(r)
            assigned = {}
            for i, a in enumerate(body.get("Assignments") or []):
                v = _assignment(emb.get(f"Assignments[{i}].Assignment"))
                if v is not None:
                    assigned[a.get("MemberId")] = v
            return base + ({"generation": body.get("GenerationId"), "member": body.get("MemberId"),
                            "assigned": assigned},)
        if key == HEARTBEAT:
            return base + ({"generation": body.get("GenerationId"), "member": body.get("MemberId")},)
        if key == LEAVE:
            ms = body.get("Members")
            if ms is None:
                left = [(body.get("MemberId"), None)]
            else:
                left = [(m.get("MemberId"), m.get("Reason")) for m in ms]
            return base + ({"left": left},)
        return base + ({"member": body.get("MemberId"), "epoch": body.get("MemberEpoch"),
                        "kind": EPOCH_HEARTBEATS.get(key)},)

    @staticmethod
    def extract(r: dict[str, Any]) -> Any:
        """What a group API's answer says, kept until it meets its request (``apply``)."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        key = r["api_key"]
        a: dict[str, Any] = {"error": error_code(body)}
        if key == JOIN:
            a.update(member_id=body.get("MemberId"), generation=body.get("GenerationId"),
                     leader=body.get("Leader"), protocol=body.get("ProtocolName"),
                     members=[m.get("MemberId") for m in body.get("Members") or []])
        elif key == SYNC:
            a["assignment"] = _assignment(_embedded(r).get("Assignment"))
        elif key in EPOCH_HEARTBEATS:
            a.update(member_id=body.get("MemberId"), epoch=body.get("MemberEpoch"),
                     assignment=_epoch_assignment(body.get("Assignment"), r.get("topic_names")))
        return key, r.get("ts"), a

    def apply(self, pos: Any, req: Any, ext: Any) -> None:
        """A group API's answer (``extract``, at ``pos``) with what ``request`` kept of its request."""
        if req is None or ext is None:
            return
        group, cid, client, req_ts, file, frame, q = req
        if not isinstance(group, str):
            return
        key, ts, a = ext
        fact = (pos, key, cid, client, req_ts, ts, file, frame, q, a)
        facts = self.facts.get(group)
        if facts is None:
            facts = self.facts[group] = []
        if len(facts) < MAX_FACTS:
            facts.append(fact)
        if a["error"] == 0:
            self.note_client(cid, group, pos)

    def merge(self, o: Groups) -> None:
        for g, fs in o.facts.items():
            mine = self.facts.get(g)
            if mine is None:
                self.facts[g] = list(fs)
            else:
                mine.extend(fs)
                if len(mine) > MAX_FACTS:
                    mine.sort(key=lambda f: f[0])
                    del mine[MAX_FACTS:]
        for cid, pg in o.client_group.items():
            self.note_client(cid, pg[1], pg[0])

    def to_list(self) -> list[dict[str, Any]]:
        out = []
        for g in sorted(self.facts):
            facts = sorted(self.facts[g], key=lambda f: f[0])
            if any(f[1] in EPOCH_HEARTBEATS for f in facts):
                out.append(_replay_epochs(g, facts))
            else:
                out.append(_replay_classic(g, facts))
        return out


def _member(mid: Any, info: dict[Any, tuple[Any, ...]]) -> dict[str, Any]:
    cid, client = info.get(mid, (None, None))
    return {"member_id": mid, "client_id": cid, "client": client}


def _who(mid: Any, info: dict[Any, tuple[Any, ...]]) -> str:
    cid = info.get(mid, (None, None))[0]
    return f"{mid} (client id {cid})" if cid is not None else str(mid)


def _causes(gens: list[dict[str, Any]], info: dict[Any, tuple[Any, ...]], left: dict[Any, Any],
            silent: dict[Any, Any], heard: dict[Any, float] | None = None) -> None:
    """Fill each generation's ``causes`` and ``cause`` from the members it gained and lost."""
    prev: set[Any] | None = None
    for gen in gens:
        cur = {m["member_id"] for m in gen["members"]}
        causes: list[dict[str, Any]] = []
        if prev is None:
            causes.append({"kind": "first", "member_id": None, "client_id": None,
                           "detail": "the first generation in the capture"})
        else:
            for mid in sorted(cur - prev, key=str):
                causes.append({"kind": "joined", "member_id": mid, "client_id": info.get(mid, (None,))[0],
                               "detail": None})
            for mid in sorted(prev - cur, key=str):
                if mid in left:
                    causes.append({"kind": "left", "member_id": mid, "client_id": info.get(mid, (None,))[0],
                                   "detail": f"reason: {left[mid]}" if left[mid] else None})
                else:
                    last = (heard or {}).get(mid)
                    quiet = "no LeaveGroup: gone silent"
                    if last is not None and gen["start_ts"] is not None:
                        quiet += f", last heard {gen['start_ts'] - last:.1f} s before this rebalance began"
                    causes.append({"kind": "timed_out", "member_id": mid, "client_id": info.get(mid, (None,))[0],
                                   "detail": silent.get(mid) or quiet})
            if not causes:
                causes.append({"kind": "rejoined", "member_id": None, "client_id": None,
                               "detail": "the same members joined again"})
        gen["causes"] = causes
        words = []
        for c in causes:
            if c["kind"] == "first" or c["kind"] == "rejoined":
                words.append(c["detail"])
            else:
                w = {"joined": "joined", "left": "left", "timed_out": "timed out"}[c["kind"]]
                words.append(f"{_who(c['member_id'], info)} {w}" + (f" ({c['detail']})" if c["detail"] else ""))
        gen["cause"] = "; ".join(words)
        prev = cur


def _replay_classic(group: str, facts: list[tuple[Any, ...]]) -> dict[str, Any]:
    gens: dict[Any, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    info: dict[Any, tuple[Any, ...]] = {}
    left: dict[Any, Any] = {}
    silent: dict[Any, Any] = {}
    events: list[dict[str, Any]] = []
    start: float | None = None
    protocol_type = None
    assignor = None

    def event(kind: str, mid: Any, cid: Any, detail: Any, f: tuple[Any, ...]) -> None:
        if len(events) < MAX_EVENTS:
            events.append({"ts": f[5], "kind": kind, "member_id": mid, "client_id": cid, "detail": detail,
                           "file": f[6], "frame": f[7]})

    heard: dict[Any, float] = {}  # member -> the last answer it got
    for f in facts:
        _pos, key, cid, client, req_ts, ts, _file, _frame, q, a = f
        code = a["error"]
        who = a.get("member_id") or q.get("member")
        if who and ts is not None:
            heard[who] = ts
        if key == JOIN:
            if start is None:
                start = req_ts
            protocol_type = q.get("protocol_type") or protocol_type
            if a.get("member_id"):
                info[a["member_id"]] = (cid, client)
            if code == 0:
                gen = gens.get(a["generation"])
                if gen is None:
                    gen = gens[a["generation"]] = {"generation_id": a["generation"], "start_ts": start,
                                                   "end_ts": None, "rebalance_ms": None, "leader": None,
                                                   "joined": [], "listed": None, "assigned": {}}
                    order.append(gen)
                if a["member_id"] not in gen["joined"]:
                    gen["joined"].append(a["member_id"])
                gen["leader"] = a.get("leader") or gen["leader"]
                assignor = a.get("protocol") or assignor
                if a.get("members"):
                    gen["listed"] = a["members"]
            elif code == MEMBER_ID_REQUIRED:
                event("join", a.get("member_id"), cid, "member id given (MEMBER_ID_REQUIRED)", f)
        elif key == SYNC:
            gen = gens.get(q.get("generation"))
            if gen is None or code != 0:
                if code:
                    event("sync_error", q.get("member"), cid, error_name(code), f)
                continue
            for mid, asg in q["assigned"].items():
                gen["assigned"].setdefault(mid, asg)
            if a.get("assignment") is not None:
                gen["assigned"][q.get("member")] = a["assignment"]
            if gen["end_ts"] is None or ts > gen["end_ts"]:
                gen["end_ts"] = ts
            start = None  # the next JoinGroup starts the next rebalance
        elif key == HEARTBEAT:
            if code == REBALANCE_IN_PROGRESS:
                event("rebalance_in_progress", q.get("member"), cid, error_name(code), f)
            elif code in GONE:
                event("fenced", q.get("member"), cid, error_name(code), f)
                silent.setdefault(q.get("member"), f"its heartbeat answered {error_name(code)}")
        elif key == LEAVE:
            for mid, reason in q["left"]:
                left[mid] = reason
                event("left", mid, cid, f"reason: {reason}" if reason else None, f)
    out_gens = []
    for gen in order:
        members = gen["listed"] if gen["listed"] is not None else gen["joined"]
        end = gen["end_ts"]
        st = gen["start_ts"]
        out_gens.append({"generation_id": gen["generation_id"], "start_ts": st, "end_ts": end,
                         "rebalance_ms": round((end - st) * 1000, 3) if end is not None and st is not None else None,
                         "leader": gen["leader"],
                         "members": [dict(_member(m, info), assignment=gen["assigned"].get(m))
                                     for m in sorted(members, key=str)]})
    _causes(out_gens, info, left, silent, heard)
    return {"group_id": group, "protocol": "classic", "protocol_type": protocol_type, "assignor": assignor,
            "generations": out_gens, "events": events}


def _replay_epochs(group: str, facts: list[tuple[Any, ...]]) -> dict[str, Any]:
    info: dict[Any, tuple[Any, ...]] = {}
    gens: dict[Any, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    left: dict[Any, Any] = {}
    silent: dict[Any, Any] = {}
    events: list[dict[str, Any]] = []
    current: dict[Any, dict[str, Any]] = {}  # member -> {"assignment"}
    kind = "consumer"
    for f in facts:
        _pos, key, cid, client, _req_ts, ts, file, frame, q, a = f
        if key not in EPOCH_HEARTBEATS:
            continue
        kind = EPOCH_HEARTBEATS[key]
        mid = a.get("member_id") or q.get("member")
        code = a["error"]
        if q.get("epoch") in (-1, -2):
            left[q.get("member")] = ("MemberEpoch -1 (leaving)" if q.get("epoch") == -1
                                     else "MemberEpoch -2 (static member leaving)")
            current.pop(q.get("member"), None)
            events.append({"ts": ts, "kind": "left", "member_id": q.get("member"), "client_id": cid,
                           "detail": left[q.get("member")], "file": file, "frame": frame})
            continue
        if code != 0:
            if code in GONE:
                silent.setdefault(mid, f"its heartbeat answered {error_name(code)}")
                current.pop(mid, None)
            if len(events) < MAX_EVENTS:
                events.append({"ts": ts, "kind": "error", "member_id": mid, "client_id": cid,
                               "detail": error_name(code), "file": file, "frame": frame})
            continue
        info[mid] = (cid, client)
        m = current.setdefault(mid, {"assignment": None})
        if a.get("assignment") is not None:
            m["assignment"] = a["assignment"]
        epoch = a.get("epoch")
        gen = gens.get(epoch)
        if gen is None:
            gen = gens[epoch] = {"generation_id": epoch, "start_ts": ts, "end_ts": ts, "members": {}}
            order.append(gen)
        gen["end_ts"] = ts
        gen["members"][mid] = dict(m)  # the assignment as of this epoch
    out_gens = []
    for gen in order:
        out_gens.append({"generation_id": gen["generation_id"], "start_ts": gen["start_ts"],
                         "end_ts": gen["end_ts"],
                         "rebalance_ms": round((gen["end_ts"] - gen["start_ts"]) * 1000, 3),
                         "leader": None,
                         "members": [dict(_member(mid, info), assignment=m["assignment"])
                                     for mid, m in sorted(gen["members"].items(), key=lambda kv: str(kv[0]))]})
    _causes(out_gens, info, left, silent)
    return {"group_id": group, "protocol": kind, "protocol_type": None, "assignor": None,
            "generations": out_gens, "events": events}
