"""LIBERO's 130 BDDL task files: parsed into exact values, malformed text named by file, and
each task either mapped onto robosuite's own objects or refused with every reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from forge_resources.libero.bddl import BddlError, Connective, Predicate, Region, parse_bddl, predicates
from forge_resources.libero.mapping import (CATEGORY_TO_ROBOSUITE, MappedTask, Unmappable, format_survey,
                                            map_problem, survey)

LIBERO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "libero"
BDDL = LIBERO / "bddl"
SUITES = {"libero_10": 10, "libero_90": 90, "libero_goal": 10, "libero_object": 10, "libero_spatial": 10}

pytestmark = pytest.mark.skipif(not BDDL.is_dir(), reason="../shared/data/libero/bddl is not beside the project")

STOVE = BDDL / "libero_10" / "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it.bddl"
CABINET = BDDL / "libero_90" / ("KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet_and_put_the_black_bowl_on_top"
                                 "_of_it.bddl")
SOUP = BDDL / "libero_object" / "pick_up_the_alphabet_soup_and_place_it_in_the_basket.bddl"
PUDDING = BDDL / "libero_90" / "LIVING_ROOM_SCENE6_put_the_chocolate_pudding_to_the_right_of_the_plate.bddl"
MUG_ON_PLATE = BDDL / "libero_90" / "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate.bddl"


def all_files() -> list[Path]:
    return sorted(BDDL.glob("*/*.bddl"))


def test_every_file_parses_into_its_suite():
    files = all_files()
    assert len(files) == 130
    problems = [parse_bddl(p) for p in files]
    counts: dict[str, int] = {}
    for problem in problems:
        counts[problem.suite] = counts.get(problem.suite, 0) + 1
        assert problem.file.endswith(".bddl") and problem.domain == "robosuite" and problem.language
    assert counts == SUITES
    assert sum(len(predicates(p.goal)) for p in problems) == 151
    assert sum(len(p.regions) for p in problems) == 1132


def test_stove_task_exact_values():
    p = parse_bddl(STOVE)
    assert (p.name, p.suite, p.file) == ("LIBERO_Kitchen_Tabletop_Manipulation", "libero_10", STOVE.name)
    assert p.language == "turn on the stove and put the moka pot on it"
    assert p.fixtures == {"kitchen_table": "kitchen_table", "flat_stove_1": "flat_stove"}
    assert p.objects == {"chefmate_8_frypan_1": "chefmate_8_frypan", "moka_pot_1": "moka_pot"}
    assert p.objects_of_interest == ("moka_pot_1", "flat_stove_1")
    assert p.regions[0] == Region("flat_stove_init_region", "kitchen_table",
                                  ((-0.21000000000000002, 0.19, -0.19, 0.21000000000000002),), ((0.0, 0.0),))
    assert p.region("flat_stove_1_cook_region") == Region("cook_region", "flat_stove_1", (), None)
    assert p.init.parts[1] == Predicate("On", ("chefmate_8_frypan_1", "kitchen_table_frypan_init_region"))
    assert p.goal == Connective("And", (Predicate("Turnon", ("flat_stove_1",)),
                                        Predicate("On", ("moka_pot_1", "flat_stove_1_cook_region"))))
    assert p.resolve("flat_stove_1_cook_region") == ("flat_stove_1", "cook_region")
    assert p.resolve("kitchen_table_moka_pot_init_region") == ("kitchen_table", "moka_pot_init_region")


def test_cabinet_task_exact_values():
    p = parse_bddl(CABINET)
    assert p.language == "close the top drawer of the cabinet and put the black bowl on top of it"
    assert p.objects == {"akita_black_bowl_1": "akita_black_bowl", "butter_1": "butter", "butter_2": "butter",
                         "chocolate_pudding_1": "chocolate_pudding"}
    assert p.init.parts[-1] == Predicate("Open", ("wooden_cabinet_1_top_region",))
    assert p.goal == Connective("And", (Predicate("Close", ("wooden_cabinet_1_top_region",)),
                                        Predicate("On", ("akita_black_bowl_1", "wooden_cabinet_1_top_side"))))
    assert p.resolve("wooden_cabinet_1_top_side") == ("wooden_cabinet_1", "top_side")
    assert p.resolve("wooden_cabinet_1_top_region") == ("wooden_cabinet_1", "top_region")
    with pytest.raises(KeyError, match="wooden_cabinet_1_lid"):
        p.resolve("wooden_cabinet_1_lid")


def test_floor_task_exact_values():
    p = parse_bddl(SOUP)
    assert p.suite == "libero_object"
    assert p.language == "Pick the alphabet soup and place it in the basket"
    assert p.fixtures == {"floor": "floor"}
    bin_region = p.region("floor_bin_region")
    assert bin_region.ranges == ((-0.01, 0.25, 0.01, 0.27),) and bin_region.yaw_rotation is None
    assert p.goal == Connective("And", (Predicate("In", ("alphabet_soup_1", "basket_1_contain_region")),))
    assert p.resolve("basket_1_contain_region") == ("basket_1", "contain_region")


def test_resolve_every_region_used_in_a_goal():
    resolved = 0
    for problem in map(parse_bddl, all_files()):
        entities = {**problem.fixtures, **problem.objects}
        for pred in predicates(problem.goal):
            for arg in pred.args:
                if arg in entities:
                    continue
                owner, region = problem.resolve(arg)
                assert f"{owner}_{region}" == arg and owner in entities
                assert region in {r.name for r in problem.regions if r.target == owner}
                resolved += 1
    assert resolved == 108


def _write(tmp_path: Path, text: str, name: str = "bad.bddl") -> Path:
    path = tmp_path / "suite_x" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("(:goal", "(:goal (", 1), "unbalanced parentheses: '(' opened on line"),
    (lambda t: t + ")\n", "unbalanced parentheses: unexpected ')'"),
    (lambda t: t[:t.index("  (:goal")] + ")\n", "missing :goal"),
    (lambda t: t.replace("(:obj_of_interest", "(:obj_of_interests", 1), "unknown section :obj_of_interests"),
    (lambda t: t.replace("moka_pot_1 - moka_pot", "moka_pot_1 moka_pot"), "moka_pot_1 moka_pot has no '- category'"),
    (lambda t: t.replace("(0.025 -0.025", "(0.025 left", 1), "region moka_pot_init_region: :ranges row"),
    (lambda t: t.replace("(On moka_pot_1 flat_stove_1_cook_region)", "(On moka_pot_1 stove_top)"),
     ":goal On(moka_pot_1, stove_top): stove_top is neither"),
])
def test_malformed_file_names_file_and_fault(tmp_path, edit, message):
    path = _write(tmp_path, edit(STOVE.read_text()))
    with pytest.raises(BddlError) as err:
        parse_bddl(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


def test_language_whitespace_is_normalized(tmp_path):
    text = STOVE.read_text().replace("(:language turn on the stove",
                                     "(:language   turn on\n      the\tstove")
    assert parse_bddl(_write(tmp_path, text)).language == "turn on the stove and put the moka pot on it"


def test_unmappable_lists_every_reason():
    result = map_problem(parse_bddl(CABINET))
    assert isinstance(result, Unmappable) and result.file == CABINET.name
    assert result.reasons == [
        "fixture wooden_cabinet_1 (wooden_cabinet) has no robosuite asset",
        "object akita_black_bowl_1 (akita_black_bowl) has no robosuite asset",
        "object butter_1 (butter) has no robosuite asset",
        "object butter_2 (butter) has no robosuite asset",
        "object chocolate_pudding_1 (chocolate_pudding) has no robosuite asset",
        "initial fact Open(wooden_cabinet_1_top_region) cannot be set up here",
        "predicate Close(wooden_cabinet_1_top_region) has no physical verifier here",
        "predicate On(akita_black_bowl_1, wooden_cabinet_1_top_side) has no physical verifier here",
    ]
    stove = map_problem(parse_bddl(STOVE))
    assert stove.reasons[-2:] == ["predicate Turnon(flat_stove_1) has no physical verifier here",
                                  "predicate On(moka_pot_1, flat_stove_1_cook_region) has no physical verifier here"]
    soup = map_problem(parse_bddl(SOUP))
    assert soup.reasons[0] == "fixture floor (floor) is not a table; in_region boxes lie on the table"
    assert "object milk_1 (milk) has no robosuite asset" not in soup.reasons
    assert ("initial fact On(milk_1, floor_other_object_region_2) cannot be set up here "
            "(objects start in boxes on the table)") in soup.reasons


def _as_robosuite(path: Path, tmp_path: Path, categories: dict[str, str]) -> Path:
    """A real task file with its object categories swapped for ones robosuite has."""
    text = path.read_text()
    for old, new in categories.items():
        text = text.replace(f"- {old}\n", f"- {new}\n")
    return _write(tmp_path, text, path.name)


def test_table_region_goal_maps_to_in_region(tmp_path):
    swapped = _as_robosuite(PUDDING, tmp_path, {"porcelain_mug": "milk", "red_coffee_mug": "milk",
                                                "plate": "wine_bottle", "chocolate_pudding": "milk"})
    task = map_problem(parse_bddl(swapped))
    assert isinstance(task, MappedTask)
    assert task.language == "put the chocolate pudding to the right of the plate"
    assert task.objects == {"porcelain_mug_1": "MilkObject", "red_coffee_mug_1": "MilkObject",
                            "plate_1": "BottleObject", "chocolate_pudding_1": "MilkObject"}
    assert task.placements["plate_1"] == [(0.125, -0.025, 0.175, 0.025)]
    assert task.goal == [{"kind": "in_region", "object": "chocolate_pudding_1",
                          "region": [0.09999999999999999, 0.05, 0.2, 0.15000000000000002]}]


def test_object_on_object_maps_to_stacked(tmp_path):
    swapped = _as_robosuite(MUG_ON_PLATE, tmp_path, {"porcelain_mug": "milk", "red_coffee_mug": "milk",
                                                     "plate": "milk", "chocolate_pudding": "wine_bottle"})
    task = map_problem(parse_bddl(swapped))
    assert isinstance(task, MappedTask)
    assert task.goal == [{"kind": "stacked", "top": "porcelain_mug_1", "bottom": "plate_1"}]
    assert set(task.placements) == set(task.objects)
    # the same file with a real plate: the plate is the one fault
    real = map_problem(parse_bddl(_as_robosuite(MUG_ON_PLATE, tmp_path, {
        "porcelain_mug": "milk", "red_coffee_mug": "milk", "chocolate_pudding": "milk"})))
    assert real.reasons == ["object plate_1 (plate) has no robosuite asset"]


def test_survey_counts_every_file():
    result = survey(BDDL)
    assert (result["parsed"], result["mapped"], result["unmappable"], result["failed"]) == (130, 0, 130, {})
    assert result["parsed"] == result["mapped"] + result["unmappable"]
    assert result["suites"] == {s: {"parsed": n, "mapped": 0, "unmappable": n} for s, n in SUITES.items()}
    reasons = result["reasons"]
    assert reasons["object"].most_common(3) == [("akita_black_bowl", 55), ("plate", 50), ("cream_cheese", 33)]
    assert reasons["fixture"].most_common(2) == [("wooden_cabinet", 38), ("flat_stove", 34)]
    assert reasons["fixture"]["floor"] == 10
    assert dict(reasons["predicate"]) == {"In": 60, "On": 20, "Close": 11, "Turnon": 8, "Open": 7, "Turnoff": 1}
    assert "milk" not in reasons["object"] and "wine_bottle" not in reasons["object"]
    for path in all_files():
        mapped = map_problem(parse_bddl(path))
        assert isinstance(mapped, Unmappable) and len(mapped.reasons) >= 1
    table = format_survey(result)
    assert "parsed 130   mapped 0   unmappable 130" in table and "akita_black_bowl" in table


def test_survey_reports_a_malformed_file_instead_of_raising(tmp_path):
    _write(tmp_path, STOVE.read_text())
    broken = _write(tmp_path, STOVE.read_text() + ")", "broken.bddl")
    result = survey(tmp_path)
    assert (result["parsed"], result["unmappable"]) == (1, 1)
    assert list(result["failed"]) == [str(broken)]


def test_survey_command_prints_the_table():
    done = subprocess.run([sys.executable, "-m", "forge_resources.libero.mapping", str(BDDL)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "parsed 130   mapped 0   unmappable 130   failed to parse 0"
    assert "libero_90             90       0          90" in done.stdout


def test_mapped_objects_are_real_robosuite_classes(tmp_path):
    pytest.importorskip("robosuite", reason="the robosuite extra is not installed (pip install -e '.[robosuite]')")
    from forge_resources.robosuite import quiet_robosuite

    quiet_robosuite()
    import robosuite.models.objects as objects

    swapped = _as_robosuite(PUDDING, tmp_path, {"porcelain_mug": "milk", "red_coffee_mug": "milk",
                                                "plate": "wine_bottle", "chocolate_pudding": "milk"})
    task = map_problem(parse_bddl(swapped))
    names = set(CATEGORY_TO_ROBOSUITE.values()) | set(task.objects.values())
    assert names == {"MilkObject", "BottleObject"}
    for instance, class_name in {**{n: n for n in names}, **task.objects}.items():
        model = getattr(objects, class_name)(name=instance)
        assert isinstance(model, objects.MujocoObject)
        assert model.name == instance


def test_or_and_not_parse_and_refuse(tmp_path):
    text = STOVE.read_text().replace(
        "(And (Turnon flat_stove_1) (On moka_pot_1 flat_stove_1_cook_region))",
        "(and (Or (Turnon flat_stove_1) (not (On moka_pot_1 flat_stove_1_cook_region))))")
    problem = parse_bddl(_write(tmp_path, text))
    inner = Connective("Or", (Predicate("Turnon", ("flat_stove_1",)),
                              Connective("Not", (Predicate("On", ("moka_pot_1", "flat_stove_1_cook_region")),))))
    assert problem.goal == Connective("And", (inner,))
    assert map_problem(problem).reasons[-1] == (
        "goal Or(Turnon(flat_stove_1), Not(On(moka_pot_1, flat_stove_1_cook_region))) has no physical verifier here")
