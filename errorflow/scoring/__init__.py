"""Scoring against ground truth and statistics over trials: pure, no I/O."""
