"""kwire proxy: a Kafka proxy that decodes a running client's traffic, with no capture at all.

Modules: ``relay`` (one direction of a connection: bytes forwarded as they come, frames handed
over whole, an answer to change held until whole; sans-io), ``rewrite`` (broker addresses in the
answers that tell clients where to connect, and ApiVersions capped to what can be rewritten; over
the codec), ``pcapout`` (the conversations as the client saw them, as a pcap file), ``server``
(asyncio: listeners, one upstream connection per client connection, and the decoding thread that
turns frames into kwire pcap's output rows with its ``Conversation``).
"""
from kwire_cli.proxy.relay import FrameRelay
from kwire_cli.proxy.rewrite import ADDRESS_APIS, AddressBook, rewrite_response
from kwire_cli.proxy.server import Proxy, ProxyConfig

__all__ = ["ADDRESS_APIS", "AddressBook", "FrameRelay", "Proxy", "ProxyConfig", "rewrite_response"]
