"""The matrix (R1): every combination x repetition, with ids that hash what a cell means."""

import math
from pathlib import Path

import pytest
import yaml

from runner.experiment import SpecError, load_spec
from runner.experiment.matrix import DIMENSIONS, describe, expand, parse_shard, select, shard

BOOK = "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"


def base() -> dict:
    """A spec with two entries in every dimension (patch arms: none and auto)."""
    return {
        "name": "exp",
        "models": [
            "scripted/careful",
            {"name": "scripted/verifies-by-id-only", "params": {"patch_compliance": 0.3}},
        ],
        "prompts": [
            {"name": "plain", "text": "Book rooms."},
            {"name": "strict", "text": "Be exact."},
        ],
        "patches": ["none", "auto"],
        "upstreams": [
            {"name": "booking", "builtin": "booking"},
            {"name": "nosearch", "builtin": "booking-nosearch"},
        ],
        "scenarios": ["F1", {"F2": {"retry_after": 1}}],
        "conversations": [
            {"name": "again", "user": BOOK, "follow_ups": ["Please try again."]},
            {"name": "single", "user": BOOK},
        ],
        "runs": 3,
    }


def load(tmp_path: Path, spec: dict, name: str = "exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return load_spec(path)


def ids_by_labels(runs) -> dict:
    return {(tuple(r.labels[d] for d in DIMENSIONS), r.repetition): r.run_id for r in runs}


# R1
@pytest.mark.parametrize(
    "sizes",
    [
        {
            "models": 1,
            "prompts": 1,
            "patches": 1,
            "upstreams": 1,
            "scenarios": 1,
            "conversations": 1,
        },
        {
            "models": 2,
            "prompts": 1,
            "patches": 2,
            "upstreams": 2,
            "scenarios": 1,
            "conversations": 2,
        },
        {
            "models": 2,
            "prompts": 2,
            "patches": 2,
            "upstreams": 2,
            "scenarios": 2,
            "conversations": 2,
        },
    ],
)
@pytest.mark.parametrize("runs", [1, 3])
def test_matrix_size_is_the_product_of_the_dimensions(tmp_path, sizes, runs):
    spec = base()
    for key, n in sizes.items():
        spec[key] = spec[key][:n]
    spec["runs"] = runs
    cells = expand(load(tmp_path, spec))
    assert len(cells) == math.prod(sizes.values()) * runs
    assert len({c.run_id for c in cells}) == len(cells)
    assert len({c.cell_id for c in cells}) == math.prod(sizes.values())


# R1
def test_a_conversation_limited_to_some_upstreams_is_crossed_with_those_only(tmp_path):
    everything = expand(load(tmp_path, base(), "a.yaml"))
    spec = base()
    spec["conversations"][1]["upstreams"] = ["nosearch"]
    limited = expand(load(tmp_path, spec, "b.yaml"))
    pairs = {(c.labels["conversation"], c.labels["upstream"]) for c in limited}
    assert pairs == {("again", "booking"), ("again", "nosearch"), ("single", "nosearch")}
    assert len(limited) == len(everything) * 3 // 4
    # The restriction is not part of a cell: the cells it keeps keep their run ids.
    kept = ids_by_labels(limited)
    assert kept.items() <= ids_by_labels(everything).items()


# R1
def test_run_ids_are_stable_across_reloads(tmp_path):
    first = expand(load(tmp_path, base(), "a.yaml"))
    second = expand(load(tmp_path, base(), "b.yaml"))
    assert [c.run_id for c in first] == [c.run_id for c in second]
    assert [c.seed for c in first] == [c.seed for c in second]


# R1
def test_run_ids_do_not_depend_on_the_order_of_list_items(tmp_path):
    reordered = base()
    for key in ("models", "prompts", "patches", "upstreams", "scenarios", "conversations"):
        reordered[key] = list(reversed(reordered[key]))
    forward = ids_by_labels(expand(load(tmp_path, base(), "a.yaml")))
    backward = ids_by_labels(expand(load(tmp_path, reordered, "b.yaml")))
    assert forward == backward


# R1
def test_cosmetic_names_do_not_change_cell_ids(tmp_path):
    renamed = base()
    renamed["models"][0] = {"name": "scripted/careful", "label": "the careful one"}
    renamed["prompts"][0]["name"] = "renamed"
    renamed["upstreams"][0]["name"] = "hotel"
    renamed["conversations"][0]["name"] = "retry"
    before = sorted(c.cell_id for c in expand(load(tmp_path, base(), "a.yaml")))
    after = sorted(c.cell_id for c in expand(load(tmp_path, renamed, "b.yaml")))
    assert before == after


# R1
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: s["prompts"][0].update(text="Book rooms!"), id="prompt text"),
        pytest.param(
            lambda s: s["models"].__setitem__(
                0, {"name": "scripted/careful", "params": {"max_wait_s": 5}}
            ),
            id="model params",
        ),
        pytest.param(
            lambda s: s["conversations"][0].update(follow_ups=["Try again."]), id="follow-ups"
        ),
        pytest.param(
            lambda s: s["upstreams"][0].update(key_fields=["request_id"]), id="upstream config"
        ),
        pytest.param(lambda s: s["scenarios"].__setitem__(0, "F3"), id="scenario"),
    ],
)
def test_a_changed_meaning_changes_the_cell_id(tmp_path, change):
    changed = base()
    change(changed)
    before = {c.cell_id for c in expand(load(tmp_path, base(), "a.yaml"))}
    after = {c.cell_id for c in expand(load(tmp_path, changed, "b.yaml"))}
    assert before != after
    assert before & after  # the untouched cells keep their ids


# R1
def test_a_changed_prompt_text_changes_its_cells_and_only_them(tmp_path):
    changed = base()
    changed["prompts"][1]["text"] = "Be exact, always."
    before = {c.cell_id: c.labels["prompt"] for c in expand(load(tmp_path, base(), "a.yaml"))}
    after = {c.cell_id: c.labels["prompt"] for c in expand(load(tmp_path, changed, "b.yaml"))}
    assert set(before.values()) == set(after.values())
    assert {p for cid, p in after.items() if cid not in before} == {"strict"}
    assert {p for cid, p in before.items() if cid not in after} == {"strict"}


# R1
def test_repetitions_of_a_cell_share_the_cell_id_and_differ_in_run_id_and_seed(tmp_path):
    cells = expand(load(tmp_path, base()))
    first = cells[0]
    same_cell = [c for c in cells if c.cell_id == first.cell_id]
    assert sorted(c.repetition for c in same_cell) == [1, 2, 3]
    assert len({c.run_id for c in same_cell}) == 3
    assert len({c.seed for c in same_cell}) == 3
    assert all(0 <= c.seed < 2**31 for c in cells)


# M3: a paired design
def test_the_patch_arms_of_one_repetition_share_its_seed(tmp_path):
    cells = expand(load(tmp_path, base()))
    by_pair: dict[tuple[str, int], set[int]] = {}
    for c in cells:
        by_pair.setdefault((c.group_id, c.repetition), set()).add(c.seed)
    arms = {c.labels["patch"] for c in cells}
    assert len(arms) >= 2
    assert all(len(seeds) == 1 for seeds in by_pair.values())
    assert len({seeds.pop() for seeds in by_pair.values()}) == len(by_pair)


# R1
def test_run_ids_belong_to_the_experiment_and_cell_ids_do_not(tmp_path):
    other = base()
    other["name"] = "exp-2"
    a = expand(load(tmp_path, base(), "a.yaml"))
    b = expand(load(tmp_path, other, "b.yaml"))
    assert [c.cell_id for c in a] == [c.cell_id for c in b]
    assert not {c.run_id for c in a} & {c.run_id for c in b}


# R1
def test_the_base_seed_changes_seeds_but_not_ids(tmp_path):
    reseeded = base()
    reseeded["seed"] = 42
    a = expand(load(tmp_path, base(), "a.yaml"))
    b = expand(load(tmp_path, reseeded, "b.yaml"))
    assert [c.run_id for c in a] == [c.run_id for c in b]
    assert [c.seed for c in a] != [c.seed for c in b]


# R1, R2
def test_a_group_is_the_cell_without_its_patch_arm(tmp_path):
    cells = expand(load(tmp_path, base()))
    by_group: dict[str, set[str]] = {}
    for c in cells:
        by_group.setdefault(c.group_id, set()).add(c.labels["patch"])
    assert all(arms == {"none", "auto"} for arms in by_group.values())
    assert len(by_group) == len({c.cell_id for c in cells}) // 2


# R2
def test_a_named_patch_is_hashed_by_its_text_and_auto_by_its_name(tmp_path):
    spec = base()
    spec["patches"] = ["none", "auto", {"name": "fix", "text": "Check first."}]
    edited = base()
    edited["patches"] = ["none", "auto", {"name": "fix", "text": "Check first, always."}]
    a = {c.cell_id: c.labels["patch"] for c in expand(load(tmp_path, spec, "a.yaml"))}
    b = {c.cell_id: c.labels["patch"] for c in expand(load(tmp_path, edited, "b.yaml"))}
    assert {arm for cid, arm in b.items() if cid not in a} == {"fix"}


# R1, R2
def test_none_arm_runs_come_first_then_the_patched_arms(tmp_path):
    spec = base()
    spec["patches"] = [{"name": "fix", "text": "Check first."}, "auto", "none"]
    cells = expand(load(tmp_path, spec))
    kinds = [c.patch.kind for c in cells]
    last_none = max(i for i, k in enumerate(kinds) if k == "none")
    assert last_none == kinds.count("none") - 1
    # Within a phase the repetition is the outer loop: a sweep cut short stays balanced.
    unpatched = [c.repetition for c in cells[: last_none + 1]]
    assert unpatched == sorted(unpatched)


# R1
@pytest.mark.parametrize(
    ("only", "expected"),
    [
        ([], 192),
        (["model=scripted/careful"], 96),
        (["model=*careful"], 96),
        (["model=scripted/*"], 192),
        (["patch=none"], 96),
        (["scenario=F2*"], 96),
        (["scenario=F2(retry_after=1)"], 96),
        (["model=*careful", "patch=auto", "upstream=booking"], 24),
        (["conversation=single", "prompt=strict", "scenario=F1"], 24),
        (["model=nothing*"], 0),
        (["model=Scripted/*"], 0),  # case-sensitive
    ],
)
def test_select_keeps_runs_matching_every_filter(tmp_path, only, expected):
    cells = expand(load(tmp_path, base()))
    chosen = select(cells, only)
    assert len(chosen) == expected
    assert chosen == [c for c in cells if c in chosen]  # the order is kept


# R1
def test_select_matches_a_model_by_label_or_by_name(tmp_path):
    spec = base()
    spec["models"][0] = {"name": "scripted/careful", "label": "careful"}
    cells = expand(load(tmp_path, spec))
    assert select(cells, ["model=careful"]) == select(cells, ["model=scripted/careful"])


# R1
@pytest.mark.parametrize(
    ("only", "fragment"),
    [
        (["modle=x"], "unknown key 'modle' (did you mean 'model'?)"),
        (["runs=3"], "unknown key 'runs'"),
        (["model"], "expected key=glob"),
    ],
)
def test_select_rejects_a_bad_filter(tmp_path, only, fragment):
    cells = expand(load(tmp_path, base()))
    with pytest.raises(SpecError) as info:
        select(cells, only)
    assert fragment in str(info.value)


# R1
def test_describe_lists_dimension_sizes_total_and_one_line_per_cell(tmp_path):
    cells = expand(load(tmp_path, base()))
    text = describe(cells)
    lines = text.splitlines()
    assert lines[0] == (
        "experiment exp: 2 models x 2 prompts x 2 patch arms x 2 upstreams x 2 scenarios"
        " x 2 conversations"
    )
    assert lines[1] == "64 cells x 3 runs each = 192 runs"
    assert lines[3].split() == ["cell_id", *DIMENSIONS, "runs"]
    rows = lines[4:]
    assert len(rows) == 64
    first = cells[0]
    assert rows[0].split() == [
        first.cell_id,
        *(first.labels[d] for d in DIMENSIONS),
        "3",
    ]
    assert {row.split()[0] for row in rows} == {c.cell_id for c in cells}


# R1
def test_describe_a_selection(tmp_path):
    cells = select(expand(load(tmp_path, base())), ["model=*careful", "scenario=F1"])
    lines = describe(cells).splitlines()
    assert lines[0].startswith("experiment exp: 1 model x 2 prompts x 2 patch arms")
    assert lines[1] == "16 cells x 3 runs each = 48 runs"
    assert describe([]) == "no runs selected"


# R1
def test_the_example_experiment_has_between_100_and_200_runs():
    spec = load_spec(Path(__file__).resolve().parents[2] / "experiments" / "example.yaml")
    assert 100 <= len(expand(spec)) <= 200


# G2
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_g2_shards_are_disjoint_and_together_the_whole_matrix(tmp_path, count):
    spec = base()
    spec["patches"] = ["none"]
    runs = expand(load(tmp_path, spec))
    parts = [shard(runs, i, count, by_group=False) for i in range(1, count + 1)]
    ids = [r.run_id for part in parts for r in part]
    assert sorted(ids) == sorted(r.run_id for r in runs) and len(set(ids)) == len(ids)
    if count == 2:
        assert all(parts), "a 2-way split of 48 runs left a shard empty"


# G2
def test_g2_a_runs_shard_depends_only_on_its_id(tmp_path):
    # Stable: another process, another order of the YAML lists, a filtered matrix: same shard.
    spec = base()
    spec["patches"] = ["none"]
    runs = expand(load(tmp_path, spec))
    reordered = {**spec, "models": spec["models"][::-1], "scenarios": spec["scenarios"][::-1]}
    again = expand(load(tmp_path, reordered, "again.yaml"))
    first = {r.run_id for r in shard(runs, 2, 3, by_group=False)}
    assert first == {r.run_id for r in shard(again, 2, 3, by_group=False)}
    filtered = select(again, ["model=scripted/careful"])
    assert {r.run_id for r in shard(filtered, 2, 3, by_group=False)} == {
        r.run_id for r in filtered if r.run_id in first
    }


# G2
def test_g2_with_an_auto_arm_a_group_stays_in_one_shard(tmp_path):
    # `auto` inserts the patches of the same group's unpatched runs: they must share a store.
    runs = expand(load(tmp_path, base()))
    for index in (1, 2, 3):
        part = shard(runs, index, 3, by_group=True)
        groups = {r.group_id for r in part}
        assert part == [r for r in runs if r.group_id in groups]


# G2
@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "/2", "1/2/3", ""])
def test_g2_a_bad_shard_is_one_clear_line(text):
    with pytest.raises(SpecError) as info:
        parse_shard(text)
    assert "expected I/N" in str(info.value) and "\n" not in str(info.value)


def test_g2_parse_shard_reads_i_of_n():
    assert parse_shard("2/4") == (2, 4)
