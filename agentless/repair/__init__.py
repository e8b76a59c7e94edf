"""Repair: build the code context from localization, sample answers, turn each into a checked patch."""
