"""One module per tab of the page: its layout (`build`) and its handlers, at module level so each
can be called and tested without a browser. Handlers take the `DemoService` first; `build` binds
it (`common.bind`), so the API sees only the visitor's parameters."""
