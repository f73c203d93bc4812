"""How an OE item is scored: the scorer every package ships as ``score.py`` (its protocols, and
the parse of a reply), used in process by the contract checks, the blind gate and evaluation."""
