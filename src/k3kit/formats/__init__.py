"""What k3kit signs and exchanges: the documents, their strict readers, and the kit's file layout.

``documents`` reads every JSON document under one budget and one set of rules; ``manifest`` builds
and checks MANIFEST.json; ``receipt`` assembles RECEIPT.json; ``kitpath`` opens a kit folder or
archive and names its files; ``vocab`` is the shared vocabulary of results (status, severity, one
problem record). Used by both sides: the publisher writes these formats, the buyer's node reads
them. Nothing here signs, verifies a signature, or touches weights.
"""
