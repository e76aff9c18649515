"""What k3kit signs and exchanges: the documents, their strict readers, and the kit's file layout.

``documents`` reads every JSON document under one budget and one set of rules; ``manifest`` builds
and checks MANIFEST.json; ``receipt`` builds the receipt's in-toto Statement; ``kitpath`` opens a
kit folder or archive; ``names`` is the one home of the kit's file names; ``vocab`` is the shared
vocabulary of results (check and preflight statuses, severity, one problem record). Used by
both sides: the publisher writes these formats, the buyer's node reads them. Nothing here signs,
verifies a signature, or touches weights.
"""
