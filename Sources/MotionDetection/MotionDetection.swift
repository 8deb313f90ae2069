// The MotionDetection module; see DESIGN.md.
