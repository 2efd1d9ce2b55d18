"""One module per tab of the page, or per panel that tabs share (`*_panel`): its layout (`build`)
and its handlers, at module level so each can be called and tested without a browser. A handler
takes the `DemoService` first, calls its view's computation (`demo.views`) and draws the result;
`build` binds the service (`common.bind`), so the API sees only the visitor's parameters. Code that
runs in the browser is in `demo/static/`, called through `browser.call`."""
