"""What every tab shares: handlers bound to the service, notices and lenient inputs. (A failure's
one-line notice is `demo.serving.failure`.)"""

import types

# the method every explanation panel starts on: the most faithful on both shipped models, the most
# comprehensive and by far the most sufficient (README, benchmarks.faithfulness)
DEFAULT_METHOD = "occlusion"


def bind(handler, service):
    """`handler` with the service as its first argument, for Gradio.

    A bound method rather than `functools.partial`: Gradio reads a handler's type hints to pass
    event data (`gr.SelectData`), and it cannot read them through a partial."""
    return types.MethodType(handler, service)


def notice_markdown(notices: list[str]) -> str:
    """Notices as a Markdown list (never containing visitor text, so no escaping is needed)."""
    return "\n".join(f"- ℹ️ {n}" for n in notices)


def lenient(component):
    """Let the component's API accept any value. `gr.Slider`/`gr.Number` reject out-of-range or
    non-numeric values with an error, while the service clamps them and says so (a script may
    send temperature -1 or top-k 10**6).

    The check is switched off on the instance: subclassing a Gradio component would make Gradio
    write a `.pyi` stub next to this file at import time.
    """
    component.preprocess = lambda payload: payload  # type: ignore[method-assign]
    return component
