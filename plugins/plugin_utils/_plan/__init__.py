"""The plan: one lane, its layers and the inventory rendered into every rank's spec."""
