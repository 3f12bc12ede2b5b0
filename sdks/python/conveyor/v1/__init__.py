"""Code generated from proto/conveyor/v1 by scripts/generate.py (the modules beside this file)."""
