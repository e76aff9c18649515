"""The publisher's side: build a kit, pack it for shipping, say what changed between versions.

``kit`` builds a kit folder from a package, a weights lock and evidence (rendering each deploy
target, hashing everything into the manifest); ``targets`` lists the deploy targets a kit renders;
``kitpack`` packs a verified kit into a ``.kit.tar.gz``; ``releasenotes`` compares two verified
versions of a kit from their signed receipts. Used by the CLI, the API and the demo; the buyer's
node (``node``) never imports it.
"""
