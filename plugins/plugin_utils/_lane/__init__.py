"""What a lane may say: its schema, layers and values, the engine table and the hardware profiles."""
