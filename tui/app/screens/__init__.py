"""One screen per step of the method (see tui/app/steps.py) and the dialogs they open."""
