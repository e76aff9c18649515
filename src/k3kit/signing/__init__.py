"""Who may sign, and how a signature is made and checked: keys, signers, envelopes, roots of trust.

``keys`` reads and writes Ed25519 key files; ``signers`` is the ``Signer`` protocol a private key
(or anything holding one) implements; ``schemes`` opens a signer from a ``--key`` URI (``file:``,
``pkcs11:``), publisher-side only; ``sign`` makes and checks the DSSE envelopes and detached
signatures k3kit uses; ``trust`` is the buyer's root of trust (pinned keys or a signed root, its
rollback and equivocation state). Used by the publisher to sign kits, receipts and licences, and
by the buyer's node to check them. Knows nothing of kits' contents, weights, or the ledger.
"""
