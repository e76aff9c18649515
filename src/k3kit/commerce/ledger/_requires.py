"""The ledger's optional dependency, checked before any ledger module imports it."""

from k3kit._resources import require_extra

require_extra("ledger", "sqlalchemy")
