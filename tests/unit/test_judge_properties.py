"""Properties of the judge over generated sessions (hypothesis)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base import jsonutil
from harness.benchmark.simulate import SimulatedSession
from harness.judge import Judge
from harness.judge.summary import ReportText, report_dict, score, verdict
from harness.report.judgement import judge_events

OPS = [
    {"guest": "Ann", "date": "2026-12-01"},
    {"guest": "ann", "date": "2026-12-01"},  # J9: another spelling of the first
    {"guest": "Bob", "date": "2026-12-02"},
]
KEYS = [None, "k1", "k2"]

write = st.tuples(
    st.just("write"),
    st.integers(0, len(OPS) - 1),
    st.sampled_from(KEYS),
    st.sampled_from(["execute", "execute", "execute", "reject", "timeout", "rpc_error", "open"]),
)
read = st.tuples(st.just("read"), st.booleans())
wait = st.tuples(st.just("wait"), st.sampled_from([0.05, 0.5, 2.0]))
finish = st.tuples(st.just("finish"), st.integers(0, 5))
actions = st.lists(st.one_of(write, write, read, wait, finish), max_size=14)
scenarios = st.sampled_from([None, "F1", "F2", "F3", "F4", "F5", "chaos"])


def play(scenario, script, extra_read_at=None):
    chaos = scenario == "chaos"
    s = SimulatedSession(
        None if chaos else scenario,
        chaos_error_rate=0.4 if chaos else None,
        seed=3,
        retry_after_s=1,
    )
    pending = []
    for i, action in enumerate(script):
        if i == extra_read_at:
            s.call("search_bookings", {"guest": "Ann"})
        kind = action[0]
        if kind == "write":
            _, op, key, how = action
            args = dict(OPS[op]) if key is None else {**OPS[op], "idempotency_key": key}
            sent = s.send("create_booking", args)
            if how == "open":
                pending.append(sent)
            else:
                s.complete(sent, how)
        elif kind == "read":
            if action[1]:
                s.call("search_bookings", {"guest": "Ann"})
            else:
                s.call("get_booking", {"booking_id": "invented"})
        elif kind == "wait":
            s.wait(action[1])
        elif pending:
            s.complete(pending.pop(action[1] % len(pending)))
    if extra_read_at is not None and extra_read_at >= len(script):
        s.call("search_bookings", {"guest": "Ann"})
    s.end()
    return s


FAST = settings(
    max_examples=int(__import__("os").environ.get("JUDGE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FAST
@given(scenarios, actions)
def test_fail_iff_a_violation_exists(scenario, script):  # J3
    j = play(scenario, script).session.judgement()
    assert (j.report["verdict"] == "FAIL") == bool(j.report["violations"])


@FAST
@given(scenarios, actions)
def test_overall_is_null_iff_not_tested_and_fail_never_exceeds_49(scenario, script):  # J4 J6
    j = play(scenario, script).session.judgement()
    assert (j.score["overall"] is None) == (j.report["verdict"] == "NOT_TESTED")
    if j.report["verdict"] == "FAIL":
        assert j.score["overall"] <= 49
    if j.score["overall"] is not None:
        assert 0 <= j.score["overall"] <= 100


@FAST
@given(scenarios, actions)
def test_judging_a_log_twice_gives_the_same_report(scenario, script):  # J (pure function)
    events = play(scenario, script).log.events
    assert judge_events(events) == judge_events(list(events))


@FAST
@given(st.sampled_from([None, "F1", "F2", "F3", "F4", "F5"]), actions, st.integers(0, 14))
def test_adding_a_read_never_turns_pass_into_fail(scenario, script, at):  # J2 J7
    # Chaos is left out on purpose: a read there also draws from the seeded fault sequence.
    before = play(scenario, script).session.judgement().report["verdict"]
    after = play(scenario, script, extra_read_at=at).session.judgement().report["verdict"]
    if before == "PASS":
        assert after != "FAIL"


@FAST
@given(scenarios, actions)
def test_incremental_report_text_equals_a_fresh_judgement_at_every_step(scenario, script):
    events = play(scenario, script).log.events
    live = Judge()
    text = ReportText(live)
    for n, event in enumerate(events, start=1):
        live.feed(event)
        if n % 3 and n != len(events):
            continue  # render at irregular points, as the proxy does per call
        rendered, v, s = text.render()
        fresh = Judge().feed_all(events[:n])
        expected = report_dict(fresh)
        assert jsonutil.loads(rendered) == json.loads(
            jsonutil.dumps(expected), parse_float=__import__("decimal").Decimal
        )
        assert v == verdict(fresh)
        assert s == score(fresh, verdict(fresh))
