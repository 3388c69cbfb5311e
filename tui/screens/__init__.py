"""One screen per step of the method (see tui.app.STEP_SCREENS) and the dialogs they open."""
