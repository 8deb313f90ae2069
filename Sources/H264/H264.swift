// The H264 module; see DESIGN.md.
