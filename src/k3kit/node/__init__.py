"""The buyer's node: verify a kit, install it, fill in the site's values, launch the engine.

``verify`` is the small trusted base (it checks a kit against its signed manifest and a root of
trust, and imports nothing that renders, pins, prices or parses arguments); ``install`` copies a
verified kit into place; ``site`` is the fixed schema of site values and ``sitefiles`` renders a
kit's deploy files with them; ``launch`` re-verifies and starts the engine with the locked flags.
Used by the CLI, the API, ``accept``, ``preflight``, ``pull``, ``audit`` and the card. Nothing
here imports the publisher's side (``publish``) or the seller's (``commerce``).
"""
