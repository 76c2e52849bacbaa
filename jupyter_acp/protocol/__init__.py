"""The wire and the names both ends share; depends on nothing else in the package.

``jsonrpc`` (the ndjson JSON-RPC connection), ``codec`` (JSON encoding), ``client_tools`` (the ``org.mini-me``
convention's names), ``kernel_link`` (how a kernel reaches its server), ``paths`` (notebook API paths), ``wire`` (the
session's events and socket operations as models, which the labextension's types are generated from).
"""
