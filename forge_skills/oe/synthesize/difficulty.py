"""How demanding an item is, from its own margins: easy, medium or hard.

Admission keeps every item decidable (its margins clear a floor a person can see); within that
floor some items are one-glance checks and others ask for a careful look. An answer rule rates
its derivation (``Rule.difficulty``) by what a person would have to tell apart: the area ratio
of two objects, how far apart in the image the nearer and the farther stand (and whether the
nearer of two also stands lower), how many things a count holds (four or fewer are seen at a
glance, unless one is small) and how close a call each object beside a named one is, how far an
object is from the reach limit, whether colour or shape alone picks out a marked object, how
many things in view share an absent one's colour. A single-referent check and a size ratio above 3:1 are easy. Rules
that rate nothing are medium. An intent asks for a share per band (``oe.difficulty``); binding offers each view's
demanding questions first, and allocation and release draw towards the mix; composition.json
reports what was met."""

from __future__ import annotations

from typing import Any, Callable

BANDS = ("easy", "medium", "hard")
DEFAULT_SHARES = {"easy": 0.2, "medium": 0.4, "hard": 0.4}
SHARE_TOLERANCE = 0.05  # a band's share may miss its target by this much and count as met
GLANCE_HEIGHT = 0.06  # of the picture's height: a nearer object this much lower is seen nearer at a glance

Rater = Callable[[dict[str, Any], dict[str, Any], Any, Any], str]


def banded(value: float | None, easy_from: float, hard_below: float) -> str:
    """Easy at or above ``easy_from``, hard below ``hard_below``, medium between (larger values
    are easier); medium when the margin is unknown."""
    if value is None:
        return "medium"
    if value >= easy_from:
        return "easy"
    return "hard" if value < hard_below else "medium"


def by_field(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Comparisons of a measured field: the margin a person sees."""
    field = tpl["answer_rule"].get("field")
    seen = why.get("image_margin")
    if field == "visible_pixels":
        return banded(seen, 1.6, 1.3)
    if field == "median_depth":
        if view is not None and _lowest_is_nearest(why, ft, view):
            return "easy"
        return banded(seen, 0.15, 0.06)
    if field in ("center_x", "center_y") and view is not None and why.get("values"):
        return by_position(why, field, ft, view)
    return "medium"


def _lowest_is_nearest(why: dict[str, Any], ft: Any, view: Any) -> bool:
    """Whether the nearer of two objects (the farther, for "which is farther") also stands clearly
    lower (higher) in the picture: on a floor or a table that height alone answers at a glance,
    and so would two markers' positions with no look at the objects. Among three or more the
    nearest is left to its depth margin: rating by height there drew kinds that stand low (a
    domino lying flat) into the easy band and made the answer guessable from the names."""
    values = why.get("values") or {}
    if len(values) != 2:
        return False
    pick = why.get("pick") or "min"
    ranked = sorted(values, key=lambda n: values[n], reverse=pick == "max")
    bases = {n: _base(ft.fact(n, view)) for n in values}
    if any(b is None for b in bases.values()):
        return False
    sign = 1.0 if pick == "min" else -1.0
    return sign * (bases[ranked[0]] - bases[ranked[1]]) >= GLANCE_HEIGHT * ft.view(view).height


def _base(fact: Any) -> float | None:
    """Image row of where an object meets what it stands on (the bottom of its visible box, or
    its centre without one): the row a person reads distance from, the same for a tall object as
    for a flat one. (Centres put tall kinds higher, and rating by them tied the bands to kinds.)"""
    if fact.bbox_2d is not None:
        return float(fact.bbox_2d[3])
    return float(fact.center_2d[1]) if fact.center_2d is not None else None


def by_position(why: dict[str, Any], field: str, ft: Any, view: Any) -> str:
    """Which is further left (or higher), rated by its closest call: the answer against each other
    option for an extreme, neighbours in the order for an order or a pair. Two objects a fifteenth
    of the picture apart side by side are told apart at a glance; the same gap between one object
    high in the picture and another far below it asks the eye to carry a line down the image, and
    judging alignment across a distance is what people do worst."""
    values = why["values"]
    axis = 0 if field == "center_x" else 1
    side = ft.view(view).width if axis == 0 else ft.view(view).height
    ranked = sorted(values, key=lambda n: values[n])
    if "pick" in why:
        answer = ranked[0] if why["pick"] == "min" else ranked[-1]
        pairs = [(answer, n) for n in ranked if n != answer]
    else:
        pairs = list(zip(ranked, ranked[1:]))
    worst = 0
    for a, b in pairs:
        ca, cb = ft.fact(a, view).center_2d, ft.fact(b, view).center_2d
        along = abs(float(values[a]) - float(values[b]))
        across = abs(float(ca[1 - axis]) - float(cb[1 - axis])) if ca is not None and cb is not None else 0.0
        worst = max(worst, _pair_call(ft.fact(a, view).bbox_2d, ft.fact(b, view).bbox_2d, axis, along, across, side))
    return BANDS[worst]


def _pair_call(box_a: Any, box_b: Any, axis: int, along: float, across: float, side: float) -> int:
    """0, 1 or 2 for telling which of two objects is further along one image axis: two side by
    side (their extents across the axis overlap) with a gap between their extents along it are
    told apart at a glance (reviewers found a can plainly right of a milk carton, centres 7% of
    the width apart, one-glance); two whose extents along it overlap ask a careful look whatever
    their centres; others, one high and one low in the picture, are graded by :func:`_call`."""
    if box_a is None or box_b is None:
        return _call(along, across, side)
    gap = _gap(box_a, box_b, axis)
    if _gap(box_a, box_b, 1 - axis) < 0 < gap:
        return 0
    return max(1, _call(along, across, side)) if gap < 0 else _call(along, across, side)


def _gap(box_a: Any, box_b: Any, axis: int) -> float:
    """Pixels between two boxes (x0, y0, x1, y1) along an axis; negative where they overlap."""
    return max(float(box_b[axis]) - float(box_a[axis + 2]), float(box_a[axis]) - float(box_b[axis + 2]))


def by_count(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Up to four things are seen as a number at a glance (subitizing); beyond that they must be
    counted one by one, and six or more in a scene is a careful count. A count one of whose
    things is small in the picture (under SMALL_SHARE of it) asks a search for it first: one band
    harder."""
    n = why.get("count")
    if n is None:
        return "medium"
    band = 0 if n <= 4 else 2 if n >= 6 else 1
    if n and view is not None and _holds_a_small_one(why, ft, view, tpl):
        band = min(2, band + 1)
    return BANDS[band]


SMALL_SHARE = 0.004  # of the picture's area: a thing this small is found by a search, not at a glance


def _holds_a_small_one(why: dict[str, Any], ft: Any, view: Any, tpl: dict[str, Any]) -> bool:
    shown = why.get("visible_pixels") or {}
    pic = ft.view(view)
    floor = tpl["admission"].get("min_visible_pixels", 1)
    return any(floor <= px < SMALL_SHARE * pic.width * pic.height for px in shown.values())


def by_count_beside(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """How many objects lie on one side of a named one: every object in view must be put on its
    side, so the count is as demanding as its closest call (the object nearest the anchor's column,
    rated as a left/right comparison is: by whether their extents overlap, then by the gap), and a
    count above four is demanding whatever the gaps."""
    offsets = why.get("offsets_px")
    anchor = why.get("anchor")
    if not offsets or anchor is None or view is None:
        return by_count(why, tpl, ft, view)
    side = ft.view(view).width
    ca = ft.fact(anchor, view).center_2d
    worst = BANDS.index(by_count(why, tpl, ft, view))
    for o, d in offsets.items():
        co = ft.fact(o, view).center_2d
        across = abs(float(ca[1]) - float(co[1])) if ca is not None and co is not None else 0.0
        worst = max(worst, _pair_call(ft.fact(anchor, view).bbox_2d, ft.fact(o, view).bbox_2d, 0, abs(float(d)),
                                      across, side))
    return BANDS[worst]


def _call(along: float, across: float, side: float) -> int:
    """0, 1 or 2 (easy, medium, hard) for telling two objects apart along one image axis: the gap
    along it against the picture's side, and against the distance across it. A gap of 8.5% of
    the side or more is a glance however far apart across (reviewers found a leftmost object
    25-35 px clear of the next one-glance, and a topmost one 21-24 px of 240 above the next,
    though far to one side, one-glance too)."""
    if along / side >= GLANCE_GAP:
        return 0
    if along / side < 0.045 or along < 0.25 * across:
        return 2
    if along / side < 0.07 or along < 0.5 * across:
        return 1
    return 0


GLANCE_GAP = 0.085  # of the picture's side: a gap this wide along the axis asked about is seen at once


def by_marked_kinds(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Which marked object is of a named kind: easy when the marked objects differ in size several
    times over (a pier beside a boat, told apart at a glance: reviewers found three such items
    one-glance), medium otherwise (kinds of a like size are told apart by their shape)."""
    labels = why.get("labels") or {}
    if view is None or len(labels) < 2:
        return "medium"
    areas = [ft.fact(n, view).visible_pixels for n in labels.values()]
    return "easy" if min(areas) > 0 and max(areas) / min(areas) >= KIND_SIZE_RATIO else "medium"


KIND_SIZE_RATIO = 3.0  # marked objects this many times apart in area are of plainly different kinds


def by_image_ratio(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Separations in the image: one 1.6 times the other is seen at a glance."""
    return banded(why.get("image_margin"), 1.6, 1.3)


def by_reach(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    if "distance_m" not in why:
        return "medium"
    return banded(abs(why["distance_m"] - why["reach_m"]), 0.3, 0.18)


def by_view_ratio(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    return banded(why.get("ratio"), 2.0, 1.6)


def by_turn(key: str, easy_from: float, hard_below: float) -> Rater:
    def rate(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
        value = why.get(key)
        return banded(abs(float(value)) if value is not None else None, easy_from, hard_below)
    return rate


def confusers(ft: Any, target: str, others: list[str]) -> set[str]:
    """What the named object shares with ``others``: ``kind`` (another of its category: its
    colour must be read) and ``colour`` (another of its colour: its kind must be read)."""
    obj = ft.object(target)
    out = set()
    if any(ft.category(n) == obj.category for n in others):
        out.add("kind")
    if obj.color and any(ft.object(n).color == obj.color for n in others):
        out.add("colour")
    return out


def by_grounding(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Telling the named object among the marked ones is a glance at colour, then at shape: easy
    when one cue settles it (no other marked object shares its colour, or those that do are of
    another kind), medium when both must be read together (some share its colour, others its
    kind). Never hard: reviewers found a purple jenga block beside a purple ball and a grey block
    as quick to find as a lone purple object (4d26cc3f, fa58b8ab), as the kinds here differ in
    shape at a glance; kinds that do not are never named beside each other (look-alikes)."""
    shared = why.get("confusers")
    if shared is None:
        return "medium"
    return "medium" if {"colour", "kind"} <= set(shared) else "easy"


def absence_band(ft: Any, target: str, shown: list[str]) -> int:
    """0, 1 or 2 (easy, medium, hard) for saying a named object is not among ``shown``: a person
    scans for its colour first, so what takes a look is another thing of its colour (its shape
    must be read), and more so beside another of its kind; another of its kind alone is ruled
    out by its colour at a glance (reviewers found such "no" answers one-glance). An object with
    no clear colour name is scanned for among the others without one: two wooden jenga blocks
    are told apart by neither cue, a green one at a glance."""
    shared = confusers(ft, target, shown)
    if not ft.object(target).color and any(not ft.object(n).color for n in shown):
        shared.add("colour")
    if "colour" not in shared:
        return 0
    return 2 if "kind" in shared else 1


def by_contrast(derive: Callable[..., tuple[Any, dict[str, Any]]]) -> Rater:
    """A check of one named object that asks for every object in view to be looked at (is it in
    view: saying no means ruling each one out), rated by the objects in view that share its kind
    or its colour but not its answer: none easy, one attribute shared medium, both hard.
    ``derive`` is the rule's own derivation. (Where the answer is read off the object once it is
    found, as whether it rests in a tray, look-alikes in view do not make it harder, and those
    rules keep their own rating.)"""
    def rate(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
        obj = why.get("object")
        if obj is None or view is None:
            return "medium"
        answer = derive(ft, view, {"object": obj}, tpl)[0]
        seen = ft.visible(view, int(tpl["admission"].get("min_visible_pixels", 1)))
        others = [o for o in seen if o != obj and derive(ft, view, {"object": o}, tpl)[0] not in (None, answer)]
        return BANDS[absence_band(ft, obj, others)]
    return rate


def by_absent_lookalikes(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    """Which listed objects are in view: as demanding as ruling out its absent options, each
    rated as a single absence is (:func:`absence_band`: colour is scanned first, so an absent
    option sharing a colour with something in view takes a look, and more so beside another of
    its kind too); the sum of those, capped at hard. A kind-mate of another colour is ruled out
    at a glance: reviewers found "red soccer ball" listed beside a purple one in view one-glance.
    (Rated by colour, lists once drew small kinds, seldom clear at room scale, mostly as absent;
    the balance gate now keeps every listed word chosen about as often as the rest.)"""
    shown = why.get("visible_pixels")
    if not shown or view is None:
        return "medium"
    seen = ft.visible(view, int(tpl["admission"].get("min_visible_pixels", 1)))
    total = sum(absence_band(ft, o, [n for n in seen if n != o]) for o, px in shown.items() if px == 0)
    return BANDS[min(2, total)]


def constant(band: str) -> Rater:
    def rate(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
        return band
    return rate


def shares_problem(shares: dict[str, float]) -> str | None:
    """Why a difficulty mix cannot be asked for, or None."""
    unknown = sorted(set(shares) - set(BANDS))
    if unknown:
        return f"unknown difficulty bands {unknown}; the bands are {list(BANDS)}"
    if any(v < 0 for v in shares.values()):
        return "difficulty shares must not be negative"
    if abs(sum(shares.values()) - 1.0) > 1e-6:
        return f"difficulty shares must add up to 1 (they add up to {sum(shares.values()):g})"
    return None


def band_targets(total: int, shares: dict[str, float]) -> dict[str, int]:
    """``total`` items split over the bands by ``shares`` (largest remainders: the parts add up)."""
    exact = {b: total * shares.get(b, 0.0) for b in BANDS}
    out = {b: int(exact[b]) for b in BANDS}
    for b in sorted(BANDS, key=lambda b: (out[b] - exact[b], BANDS.index(b)))[: total - sum(out.values())]:
        out[b] += 1
    return out


def band_quotas(needs: dict[str, int], available: dict[str, dict[str, int]],
                shares: dict[str, float]) -> dict[str, dict[str, int]]:
    """Items per capability and band: each capability's need split by the shares, as far as its
    available items of each band allow; what a capability cannot take in one band it takes in
    the band the whole set is shortest of, and capabilities rich in a band take more of it in
    exchange for a band others have in surplus, so the overall mix comes as near the shares as
    the items allow. A capability never gets more than it needs or has."""
    quota = {c: {b: min(available.get(c, {}).get(b, 0), t) for b, t in band_targets(n, shares).items()}
             for c, n in needs.items()}
    goal = band_targets(sum(needs.values()), shares)

    def deficit() -> dict[str, int]:
        return {b: goal[b] - sum(q[b] for q in quota.values()) for b in BANDS}

    def spare(c: str, b: str) -> int:
        return available.get(c, {}).get(b, 0) - quota[c][b]

    for c in sorted(needs):  # leftovers go where the whole set is shortest
        while sum(quota[c].values()) < needs[c]:
            options = [b for b in BANDS if spare(c, b) > 0]
            if not options:
                break
            d = deficit()
            quota[c][max(options, key=lambda b: (d[b], -BANDS.index(b)))] += 1
    for _ in range(sum(needs.values())):  # exchanges: one item from a surplus band to a short one
        d = deficit()
        moved = False
        for short in sorted((b for b in BANDS if d[b] > 0), key=lambda b: -d[b]):
            for over in sorted((b for b in BANDS if d[b] < 0), key=lambda b: d[b]):
                c = next((c for c in sorted(needs) if spare(c, short) > 0 and quota[c][over] > 0), None)
                if c is not None:
                    quota[c][short] += 1
                    quota[c][over] -= 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return quota


def water_fill(need: int, available: dict[str, int]) -> dict[str, int]:
    """``need`` spread as evenly as ``available`` allows: each key takes an equal part, a key
    short of its part leaving the rest to the others."""
    share = {t: 0 for t in available}
    left = need
    open_ = sorted((t for t in available if available[t] > 0), key=lambda t: (available[t], t))
    while left > 0 and open_:
        each = max(1, left // len(open_))
        for t in list(open_):
            take = min(each, available[t] - share[t], left)
            share[t] += take
            left -= take
            if share[t] >= available[t]:
                open_.remove(t)
            if left <= 0:
                break
    return share


def template_quotas(need: int, quota: dict[str, int], available: dict[str, dict[str, int]]
                    ) -> dict[str, dict[str, int]]:
    """A capability's band quotas split over its templates: each band's quota spread evenly over
    the templates that have items of that band, so a template whose items are all of one band
    takes only its part of that band and templates holding the bands the mix wants take more of
    them. What the bands leave of ``need`` is spread over whatever the templates have left, in
    the band each holds most of. Returns items per template and band."""
    out = {t: dict.fromkeys(BANDS, 0) for t in available}
    for b in BANDS:
        for t, n in water_fill(quota.get(b, 0), {t: available[t].get(b, 0) for t in available}).items():
            out[t][b] = n
    left = need - sum(sum(v.values()) for v in out.values())
    if left > 0:
        spare = {t: {b: available[t].get(b, 0) - out[t][b] for b in BANDS} for t in available}
        for t, n in water_fill(left, {t: sum(v.values()) for t, v in spare.items()}).items():
            for b in sorted(BANDS, key=lambda b: -spare[t][b]):
                take = min(n, spare[t][b])
                out[t][b] += take
                n -= take
    return out


def mix_report(items_bands: list[str], shares: dict[str, float], per_capability: dict[str, dict[str, int]]
               ) -> dict[str, Any]:
    """What composition.json says of difficulty: the asked shares, the items per band, the shares
    reached, whether each is within SHARE_TOLERANCE, and the bands per capability."""
    n = len(items_bands)
    counts = {b: items_bands.count(b) for b in BANDS}
    reached = {b: round(counts[b] / n, 4) if n else 0.0 for b in BANDS}
    met = all(abs(reached[b] - shares.get(b, 0.0)) <= SHARE_TOLERANCE for b in BANDS)
    out: dict[str, Any] = {"target_shares": {b: shares.get(b, 0.0) for b in BANDS}, "items": counts,
                           "shares": reached, "met": met, "capabilities": per_capability}
    if not met:
        short = [f"{b} {reached[b]:.0%} of {shares.get(b, 0.0):.0%}" for b in BANDS
                 if reached[b] < shares.get(b, 0.0) - SHARE_TOLERANCE]
        out["shortfall"] = ("the accepted items hold too few " + ", ".join(short) + " items: their templates' "
                            "margins put fewer there" if short else "a band holds more than its share")
    return out


def steered(groups: list[list[list[str]]], k: int, band_of: Callable[[str], str], deficit: dict[str, int]
            ) -> list[str]:
    """Up to ``k`` ids: the answers (``groups``, each a list of places, each place its ids in
    their own order) taking turns as before and, within an answer, its places in turn (where the
    answer's marker lies among the others; one place where that does not apply). Each turn takes
    its place's next id of the band the mix is shortest of (``deficit``: items still wanted per
    band, updated here). Answers stay as balanced as the groups allow, and places within each
    answer, while the bands move towards the mix: a band drawn from where it lies would
    otherwise tie the answer to its marker's place (the nearer of two is easy when it also
    stands lower)."""
    answers: list[list[dict[str, list[str]]]] = []
    for places in groups:
        pools = []
        for group in places:
            by_band: dict[str, list[str]] = {}
            for i in reversed(group):  # reversed: pop() takes them in order
                by_band.setdefault(band_of(i), []).append(i)
            pools.append(by_band)
        answers.append(pools)
    turn = [0] * len(answers)  # the place whose turn it is, per answer
    out: list[str] = []
    while len(out) < k and any(any(p.values()) for pools in answers for p in pools):
        for a, pools in enumerate(answers):
            if len(out) >= k:
                break
            for step in range(len(pools)):
                pool = pools[(turn[a] + step) % len(pools)]
                bands = [b for b, ids in pool.items() if ids]
                if bands:
                    band = max(bands, key=lambda b: (deficit.get(b, 0), -BANDS.index(b) if b in BANDS else 0))
                    out.append(pool[band].pop())
                    deficit[band] = deficit.get(band, 0) - 1
                    turn[a] = (turn[a] + step + 1) % len(pools)
                    break
    return out
