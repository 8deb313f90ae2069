// The Configuration module; see DESIGN.md.
