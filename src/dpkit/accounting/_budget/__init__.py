"""The parts of :class:`dpkit.accounting.Budget`, each in its own module.

* :mod:`.records`: the values a budget hands out (``Pair``, ``ChargeCost``, ``ChargeRecord``,
  ``Share``) and the first sentence of a refusal;
* :mod:`.terms`: what a budget is (its validated definition, fixed at construction) and the
  prices of an ``(epsilon, delta)`` share of a zCDP budget;
* :mod:`.kinds`: how each accounting kind (pure, basic, zcdp, gdp, rdp) reads its interpreter:
  spent, remaining, the cost of one charge, a split into equal parts;
* :mod:`.filter`: what may be charged: the event a charge stands for, the trial state after it,
  whether it fits, and the refusal when it does not;
* :mod:`.replay`: the ledger-backed book: records written by compare-and-append and replayed
  to rebuild the state, the fork guard, per-analyst caps;
* :mod:`.saved`: the JSON forms (``to_json``/``from_json``, a stored definition);
* :mod:`.subs`: :class:`SubBudget`, an analyst's view of a book.

Each module receives the state it works on as arguments; none reads another's private names.
"""

__all__: list[str] = []
