"""The Textual app: the app itself, its screens (one per step of the method), widgets and palette."""
