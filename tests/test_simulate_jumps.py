"""A quiet ending step (scheduler._Run._ending_step: a request ends and nothing else happens) is played inside the
decode stretch before it. Played that way or as a full event step, every figure of the run must be the same."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.simulate import scheduler
from kvplan.simulate.allocators import ALLOCATORS, make_allocator
from kvplan.simulate.pool import Pool, StepTime
from kvplan.simulate.sharing import BeamSearch, ParallelSamples, Single
from kvplan.simulate.workload import Request, Workload

SLOT = 2


def figures(workload: Workload, pool: Pool, name: str, step_time: StepTime | None) -> tuple:
    outcome = scheduler.simulate(workload, pool, make_allocator(name, pool), step_time)
    meter = outcome.meter
    return (outcome.to_dict(), outcome.finished_at, meter.series, meter.everywhere, meter.memory_bound)


requests = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 200), st.floats(0, 2),
                              st.sampled_from([Single(), Single(), ParallelSamples(2), BeamSearch(2)]),
                              st.sampled_from([None, None, 0, 1])), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(30, 120), st.sampled_from([(), ((64, 1),)]), st.booleans(),
       st.sampled_from(sorted(ALLOCATORS)))
def test_quiet_endings_in_the_stretch_equal_event_steps(monkeypatch_module, drawn, blocks, windows, timed, name):
    workload = Workload([Request(i, arrival if timed else 0.0, prompt, output, sharing, prefix, 48 if prefix is not
                                 None else 0) for i, (prompt, output, arrival, sharing, prefix) in enumerate(drawn)])
    pool = Pool(blocks * 16 * SLOT, 16, 16 * SLOT, 512, 8, 256, windows=windows)
    step_time = StepTime(20, 1, "test") if timed else None
    jumped = figures(workload, pool, name, step_time)
    with monkeypatch_module.context() as patch:
        patch.setattr(scheduler._Run, "_ending_step", lambda self, waits, seconds: False)
        stepped = figures(workload, pool, name, step_time)
    assert jumped == stepped


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch
