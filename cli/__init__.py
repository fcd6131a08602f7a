"""The ``logmgr`` command line: a thin click layer over the library."""
