"""The suite registry, filled by importing each suite module: one module per `pickle bench` suite."""
from .registry import known, lookup, register  # noqa: F401
from . import ipc, memcpy, p2p  # noqa: F401,E402
from . import transports  # noqa: F401,E402
from . import interference  # noqa: F401,E402
from . import coll, scenario  # noqa: F401,E402
from . import compute  # noqa: F401,E402
from . import matrix  # noqa: F401,E402
