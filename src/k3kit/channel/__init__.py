"""The maintenance channel: a TUF repository of kit archives, and the buyer's updater.

Why TUF (python-tuf) and not one more home-made format: a channel must prove more than "these
bytes were signed once". A server in between could keep serving an old, genuinely signed view
forever (a freeze), serve an older view (a rollback), or combine files from two views (a
mix-and-match). TUF's timestamp and snapshot roles exist for exactly these, and python-tuf's
``ngclient`` is the audited client that checks them. This package adds what is k3kit's own:
signing TUF metadata with k3kit's signers by URI (:mod:`.tufsigner`), a target per kit version
with its package, version, sequence, kit checksum and release time (:mod:`.repository`), the
entitlement's term (:mod:`.term`), one mapping from python-tuf's exceptions to registered codes
(:mod:`.errors`), and an update that installs through ``k3kit install``'s own code path
(:mod:`.client`).

Nothing on the buyer's ``verify``/``install`` path imports this package (tests/test_startup.py):
python-tuf is the optional ``channel`` extra.
"""
