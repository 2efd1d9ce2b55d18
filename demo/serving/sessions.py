"""Gradio's per-session record, started empty instead of with the whole page in it.

Gradio keeps a `SessionState` for every session: a browser tab, a `gradio_client`, and every call
of the plain HTTP API (`POST /gradio_api/call/<api>`) that sends no `session_hash`. Starting one
builds the config of every component on the page (215 here, `inspect.signature` of each class
included), only so that `/gradio_api/deep_link` can save them. That took ~20 ms of CPU on the
server's event loop before each such API call could run, more than the classifier itself, and
kept ~340 KB per session until 10,000 newer sessions pushed it out. A `LazySessionState` builds a
component's config when Gradio first reads or updates it (a request touches its own inputs and
outputs), and the rest when a deep link asks for all of them.
"""

from types import SimpleNamespace

from gradio import state_holder


class ComponentConfigs(dict):
    """Block id -> that block's config, each built on first use."""

    def __init__(self, blocks_config, ids: set[int]):
        super().__init__()
        self.blocks_config, self.ids = blocks_config, ids

    def __missing__(self, key: int) -> dict:
        config = self[key] = self.blocks_config.config_for_block(key, [], self.blocks_config.blocks[key])
        return config

    def complete(self) -> None:
        for key in self.ids - self.keys():
            self.__missing__(key)


class LazySessionState(state_holder.SessionState):
    def __init__(self, blocks):
        # Gradio's own set-up, given no blocks to build configs for; then the configs on demand
        super().__init__(SimpleNamespace(default_config=blocks.default_config, blocks={}))
        self.config_values = ComponentConfigs(self.blocks_config, set(blocks.blocks) & set(self.blocks_config.blocks))

    @property
    def components(self):
        """Every component's config, as `/gradio_api/deep_link` saves them."""
        self.config_values.complete()
        return super().components


def start_sessions_lazily() -> None:
    """Make every new Gradio session a `LazySessionState` (Gradio's `StateHolder` creates them)."""
    state_holder.SessionState = LazySessionState
