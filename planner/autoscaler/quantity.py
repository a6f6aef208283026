"""The ``quantity`` module parses Kubernetes resource quantities as the API server does.

``averageValue: 500m`` and ``threshold: "0.8"`` are quantities. The controller
works in integer milli-units (``resource.Quantity.MilliValue()``), rounding up;
so does everything here.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

__all__ = ["parse_quantity_milli"]

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))((?:[eE][+-]?\d+)|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity_milli(value) -> int:
    """A Kubernetes quantity in milli-units, rounded up (``Quantity.MilliValue()``).

    Parameters
    ----------
    value : str, int or float
        ``"500m"``, ``"0.8"``, ``40``, ``"1Gi"``, ``"1e3"``.

    Returns
    -------
    int
        [milli-units]

    Raises
    ------
    ValueError
        Not a quantity.

    Examples
    --------
    >>> parse_quantity_milli("500m"), parse_quantity_milli(0.8), parse_quantity_milli("1k")
    (500, 800, 1000000)
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a quantity: {value!r}")
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {value!r}") from None
    scale = Decimal(10) ** int(suffix[1:]) if suffix[:1] in ("e", "E") else _SUFFIXES[suffix]
    return int((amount * scale * 1000).to_integral_value(rounding=ROUND_CEILING))
