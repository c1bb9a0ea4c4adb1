"""The Linear benchmark: points and suites, metrics (seed 000; DESIGN §7-§8)."""
