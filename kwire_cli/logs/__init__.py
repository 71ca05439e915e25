"""Kafka's log directory on disk: segments, their indexes and KRaft snapshots (``kwire dump-log``).

* ``segment``: a ``*.log`` segment (or a ``*.checkpoint`` snapshot, which is the same sequence of
  record batches) read entry by entry from position 0, streamed: one batch in memory at a time.
  Every batch is decoded by ``kwire_cli.records`` and every record of an internal topic by
  ``kwire_cli.codec.internal``; a truncated or damaged tail is one ``damage`` entry.
* ``index``: ``*.index`` (offset index) and ``*.timeindex`` entries, and their check against the
  segment beside them.
* ``files``: which files a FILE|DIR argument stands for, and the topic of a partition directory.
"""
from kwire_cli.logs.files import LogFile, log_files, topic_of
from kwire_cli.logs.index import IndexCheck, IndexEntry, SegmentMap, read_index, segment_map, verify_index
from kwire_cli.logs.segment import SegmentEntry, iter_segment

__all__ = ["IndexCheck", "IndexEntry", "LogFile", "SegmentEntry", "SegmentMap", "iter_segment", "log_files",
           "read_index", "segment_map", "topic_of", "verify_index"]
