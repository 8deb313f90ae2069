print("vigil-bench: measurements arrive with the encoder")
