"""The sizing policy's `Plan` (`training.budget`), without data: frozen, each decision a new plan, and the
settings the trainer trains with made from the ones given, which stay as they were."""

import dataclasses

import pytest

from training.budget import MIN_EVALUATIONS, Plan
from training.training_args import TrainConfig

GIVEN = TrainConfig(max_steps=None, max_minutes=1.0, warmup_steps=50)


def test_a_plan_starts_from_the_settings_given_and_never_changes_them():
    plan = Plan.given(GIVEN)
    assert plan == Plan(max_steps=None, warmup_steps=50, eval_every=GIVEN.eval_every, dropout=None, refitting=False,
                        sized=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.max_steps = 33
    sized = dataclasses.replace(plan, max_steps=33, sized={"max_steps": 33}).capped_warmup()
    assert (sized.max_steps, sized.warmup_steps) == (33, 8)  # a quarter of 33, not the preset's 50
    trains_with = sized.settings(GIVEN)
    assert (trains_with.max_steps, trains_with.warmup_steps, trains_with.lr) == (33, 8, GIVEN.lr)
    assert (GIVEN.max_steps, GIVEN.warmup_steps) == (None, 50) and plan.max_steps is None


def test_a_new_count_is_recorded_beside_the_first_and_the_old_record_is_left_alone():
    first = Plan(max_steps=33, warmup_steps=8, eval_every=5, refitting=True,
                 sized={"step_seconds": 1.0, "max_steps": 33})
    refit = first.counted(40, refit_step=10, refit_step_seconds=0.8)
    assert refit.sized == {"step_seconds": 1.0, "max_steps": 40, "first_max_steps": 33, "refit_step": 10,
                           "refit_step_seconds": 0.8}
    again = refit.counted(38, cooled_down_at=20)
    assert again.sized["first_max_steps"] == 33 and again.sized["max_steps"] == 38 == again.max_steps
    assert first.sized == {"step_seconds": 1.0, "max_steps": 33} and refit.sized["max_steps"] == 40
    assert (again.warmup_steps, again.eval_every, again.refitting) == (8, 5, True)  # a count changes only the count


def test_a_sized_run_evaluates_at_least_min_evaluations_times_and_never_less_often_than_asked():
    given = Plan.given(GIVEN)  # every 100 steps
    short = dataclasses.replace(given, max_steps=290).evaluated_often()
    assert short.eval_every == 58 == 290 // MIN_EVALUATIONS  # 5 points on the curve, not 2
    assert short.settings(GIVEN).eval_every == 58 and GIVEN.eval_every == 100
    assert dataclasses.replace(given, max_steps=1325).evaluated_often().eval_every == 100  # as asked: often enough
    assert dataclasses.replace(given, max_steps=3).evaluated_often().eval_every == 1
