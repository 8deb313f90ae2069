// The Recorder module; see DESIGN.md.
