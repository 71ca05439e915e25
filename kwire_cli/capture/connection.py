"""One TCP connection as the assembler sees it: its two directions (reassembly's ``TcpDir`` and
framing's ``FrameDir`` each), its byte-stream stack (``transforms``, then the framer), the broker
side, the open requests."""
from __future__ import annotations

from itertools import pairwise
from typing import Any

from .events import endpoint
from .framing import FrameDir
from .tcp import TcpDir


class Connection:
    """One TCP connection: two directions, the stack its bytes go through, the open requests."""

    __slots__ = ("keys", "ends", "dirs", "frames", "broker", "reason", "label", "open", "noreply", "syn_from",
                 "last_ts", "file", "gen", "kafka", "reset", "fin_seen", "apis", "opened", "cid", "held",
                 "hold_pkts", "tls", "sasl", "sasl_mech", "stages", "framer", "sink")

    def __init__(self, src: tuple[Any, ...], dst: tuple[Any, ...], gen: int = 1, framer: Any = None) -> None:
        self.ends = (src, dst)
        self.keys = (src + dst, dst + src)
        self.frames = (FrameDir(), FrameDir())
        self.dirs = (TcpDir(self.frames[0]), TcpDir(self.frames[1]))
        self.broker: int | None = None
        self.reason = ""
        self.label = f"{endpoint(*src)}<->{endpoint(*dst)}" + (f"#{gen}" if gen > 1 else "")
        self.open: dict[int, Any] = {}  # correlation id -> (api_key, api_version, ts, packet)
        self.noreply: dict[int, Any] = {}  # the last few acks=0 Produce requests, in case a broker answers anyway
        self.syn_from: int | None = None
        self.last_ts = 0.0
        self.file = ""
        self.gen = gen
        self.kafka = True
        self.reset = False
        self.fin_seen = False
        self.apis: set[tuple[int, int]] = set()   # (api key, version) of the requests seen (bounded)
        self.opened = 0          # requests opened so far (resync rescans when it changes)
        self.cid = False         # a client id of this connection is in known_clients
        self.held = False        # a direction holds an acknowledged hole open (late segments)
        self.hold_pkts = 0       # packets of the connection since then
        self.tls: Any = None     # the TlsStage, when the connection is TLS
        self.sasl: Any = None    # the SaslTokens stage while KIP-43 raw tokens are still to come
        self.sasl_mech: str | None = None  # the mechanism the last SaslHandshake v0 request named
        self.stages: list[Any] = []   # transforms of the byte stream, in order, before the framer
        self.framer = framer     # the last stage
        self.sink = framer       # the first stage: where reassembly's bytes go

    def add_stage(self, stage: Any) -> None:
        """Put ``stage`` last before framing."""
        self.stages.append(stage)
        self._link()

    def remove_stage(self, stage: Any) -> None:
        self.stages.remove(stage)
        if stage is self.sasl:
            self.sasl = None
        self._link()

    def _link(self) -> None:
        chain = [*self.stages, self.framer]
        for a, b in pairwise(chain):
            a.next = b
        first = chain[0]
        entry = getattr(first, "entry", None)      # (a stage may have a faster way in: TlsStage)
        self.sink = entry() if entry is not None else first
