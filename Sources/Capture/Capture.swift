// The Capture module; see DESIGN.md.
