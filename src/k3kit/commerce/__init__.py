"""The seller's side: licences, buyer receipts, and the ledger of sales.

``licence`` issues and checks a signed licence bound to a package, a kit and a price;
``buyer_receipt`` is the receipt a buyer gets for a purchase, checked offline against the seller's
key; ``ledger`` is the seller's database of sales (SQLAlchemy and psycopg live there and nowhere
else), with its signed checkpoints. Used by the CLI. A buyer's node checks a licence or a buyer
receipt with ``licence`` and ``buyer_receipt`` alone: neither imports the ledger, and ``node``
imports nothing here.
"""
