"""What kwire writes: output rows, records and log entries in every format.

Above ``capture`` (the rows it makes) and below the commands: one writer per format
(``writers``: table, fields, records, JSON, JSON lines, summary) used by ``kwire pcap`` (files,
standard input, ``--follow``) and ``kwire proxy``; the pcap table's cells (``table``), ``-e`` fields
(``fields``), record lines as kcat prints them (``records``), the one formatter of record keys,
values and headers (``forms``), ``kwire dump-log``'s lines (``logtext``) and the progress bar of
files being read (``progress``).
"""
