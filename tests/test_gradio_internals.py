"""Canaries for the Gradio internals the app relies on (docs/gradio_internals.md lists each one and
why it exists). `requirements.txt` pins the exact Gradio these were tested with, and it must be the
Space card's `sdk_version`; on the next Gradio, each test below fails loudly where the internal it
guards changed, instead of the app silently losing what the internal bought."""

import inspect
import re

import gradio as gr
import plotly.graph_objects as go
from gradio import blocks, queueing, state_holder

from demo.app import DEFAULT_CHECKPOINTS
from demo.serving.sessions import LazySessionState, start_sessions_lazily
from demo.tabs.common import lenient
from demo.tabs.export_panel import _value

REPO_ROOT = DEFAULT_CHECKPOINTS.parent


def pinned_gradio() -> str:
    lines = [line.split("#")[0].strip() for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()]
    pins = [line.split("==", 1)[1].strip() for line in lines if re.match(r"gradio\s*==", line)]
    assert len(pins) == 1, "requirements.txt must pin gradio with == (the version the app was tested with)"
    return pins[0]


def test_the_pin_is_the_space_cards_sdk_version_and_the_installed_one() -> None:
    card = re.search(r"^sdk_version:\s*([\w.]+)\s*$", (REPO_ROOT / "README.md").read_text(), re.MULTILINE)
    assert card and card.group(1) == pinned_gradio() == gr.__version__


def test_sessions_are_made_by_name_from_the_state_holder_module() -> None:
    """demo/serving/sessions.py swaps `state_holder.SessionState`: that works only while StateHolder looks the
    class up by its module-level name, and builds every config in __init__ from
    `blocks.default_config` and `config_for_block(k, [], block)` (which LazySessionState defers)."""
    gradios = LazySessionState.__base__  # Gradio's own class (the module's name may already be swapped)
    assert gradios.__module__ == state_holder.__name__ and gradios.__name__ == "SessionState"
    assert "SessionState(self.blocks)" in inspect.getsource(state_holder.StateHolder.__getitem__)
    init = inspect.getsource(gradios.__init__)
    assert "copy(blocks.default_config)" in init and "config_for_block(k, [], v)" in init
    assert "self.config_values" in inspect.getsource(gradios.components.fget)
    start_sessions_lazily()
    assert state_holder.SessionState is LazySessionState


def test_the_queue_still_polls_through_the_attributes_the_app_sets() -> None:
    """demo/serving/queue.py `poll_by_load` sets `sleep_when_free` / `progress_update_sleep_when_free` and wraps
    `process_events` on the instance; the loops must still read them through `self` (the behaviour is
    tested in tests/test_app_client.py with a held chat)."""
    assert "self.sleep_when_free" in inspect.getsource(queueing.Queue.start_processing)
    assert "self.process_events" in inspect.getsource(queueing.Queue.start_processing)
    assert "self.progress_update_sleep_when_free" in inspect.getsource(queueing.Queue.start_progress_updates)
    assert gr.Blocks().queue()._queue is not None  # the app reaches the queue as `app._queue`


def test_inputs_are_preprocessed_through_the_instance() -> None:
    """demo/tabs/common.py `lenient` replaces `preprocess` on a component instance, so that the
    service can clamp an out-of-range slider value and say so instead of Gradio's bare error."""
    assert "block.preprocess" in inspect.getsource(blocks.Blocks.preprocess_data)
    slider = lenient(gr.Slider(0, 2))
    assert slider.preprocess(-1) == -1 and slider.preprocess(10**6) == 10**6


def test_empty_values_are_postprocessed_from_none() -> None:
    """demo/tabs/chat.py `emptying` sends each panel the value `postprocess(None)` gives, dumped as
    the page receives it."""
    assert gr.Plot().postprocess(None) is None
    empty_table = gr.Dataframe(headers=["a", "b"]).postprocess(None).model_dump()
    assert empty_table["headers"] == ["a", "b"] and empty_table["data"] == []


def test_a_plot_input_arrives_as_plot_data_with_its_json() -> None:
    """demo/tabs/export_panel.py reads the figure of a plot input from `PlotData.plot`."""
    plot = gr.Plot()
    received = plot.preprocess(plot.postprocess(go.Figure(go.Bar(y=[1, 2]))))
    assert isinstance(received.plot, str) and '"type":"bar"' in received.plot.replace(" ", "")
    assert _value("figure", received) == received.plot
