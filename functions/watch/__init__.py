"""The watch Lambda: one pass over every active wave and trigger (scheduled every minute)."""
